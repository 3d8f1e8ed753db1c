# difftest regression (seed 52, shrunk): an old WeakMap whose young value, held through one
# minor GC, becomes unreachable and dies in the next minor GC must not keep a dangling
# reference. Buggy Mosaic: "ERR wm slot 11: key N (value unreachable) maps to String".
S.wm_new(11, false)
S.age(4)
S.wm_put(11, 20, 933649669, :young, :young)
S.gc(false, true, nil)
S.wm_unhold_val(11, 5, 756359103)
S.minor2()
S.pool(3, 508762902)
S.check()
