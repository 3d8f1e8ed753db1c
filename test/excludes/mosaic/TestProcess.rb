# Known differences of Mosaic from CRuby's default GC, reviewed. Each names its cause.
exclude(:test_warmup_run_major_gc_and_compact, "asserts Process.warmup compacts (compact_count 1); Mosaic has no compaction yet")
