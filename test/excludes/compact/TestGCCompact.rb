# The compaction gate (scripts/test.sh "compact") runs the GC-critical test-all files with
# GC.auto_compact = true in every Ruby (test/auto_compact_on.rb). Reviewed exclusions, each with
# how the default GC fares with auto_compact on (checked with the same RUBYOPT, 3 runs each):
# each of these counts how many of 50,000 fresh objects one verify_compaction_references moves
# (>= 49,990), but with auto_compact on, the major GCs that run while the test allocates them
# have already compacted and moved some of them into the class they belong in, so fewer move at
# the call the test checks. Not a correctness failure: the moved objects are where the test wants
# them. Each passes in the plain gates (auto_compact off).
exclude(:test_moving_arrays_down_heaps, "auto_compact moved them at earlier majors (mosaic: 0 of 50000 left to move down); the default GC fails it the same way with auto_compact on (13726 of 49990)")
exclude(:test_moving_arrays_up_heaps, "auto_compact moved ~400 of them at an earlier major (mosaic: 49601 of 49990); the default GC passes it with auto_compact on only because no major GC runs while it allocates its arrays under its heap growth")
exclude(:test_moving_hashes_down_heaps, "auto_compact moved some at earlier majors (mosaic 49700, default 45912 of 49990): the default GC fails it the same way")
exclude(:test_moving_objects_between_heaps, "auto_compact moved some at earlier majors (mosaic 49750, default 48118 of 49990): the default GC fails it the same way")
exclude(:test_moving_strings_down_heaps, "auto_compact moved some at earlier majors (mosaic 35544, default 46745 of 49990): the default GC fails it the same way")
exclude(:test_moving_strings_up_heaps, "auto_compact moved some at earlier majors (mosaic 49601, default 48566 of 49990): the default GC fails it the same way")
