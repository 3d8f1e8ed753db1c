# difftest regression (hand-written scenario, shrunk): an old WeakKeyMap with Integer values
# (so nothing keeps it remembered) and young keys that die in the second minor GC; their slots
# are reused by live objects. Buggy Mosaic keeps the entries: "ERR wkm slot 0: size N, 0 held".
S.pool(50, 1)
S.wm_new(0, true)
S.age(4)
S.wm_put(0, 33, 1, :young, :int)
S.gc(false, true, nil)
S.wm_unhold(0, 33, 1)
S.minor2
S.pool(33, 1)
