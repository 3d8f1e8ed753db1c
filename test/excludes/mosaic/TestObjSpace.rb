# Known differences of Mosaic from CRuby's default GC, reviewed. Each names its cause.
exclude(:test_dump_flags, "asserts a string is dumped as old; Mosaic has no old generation yet")
