# difftest regression (seed 56, shrunk): as weakmap_young_value_of_old_map.rb with two entries;
# buggy Mosaic crashes (SEGV, or "[BUG] weak reference ... points to a free slot") at the next
# full GC, which marks the dangling weak reference.
S.wm_new(2, false)
S.age(4)
S.wm_put(2, 2, 649067938, :old, :young)
S.gc(false, true, nil)
S.wm_unhold_val(2, 1, 153209921)
S.gc(false, true, nil)
