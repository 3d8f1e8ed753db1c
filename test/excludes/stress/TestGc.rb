# The stress gate (scripts/stress-gate.sh) runs the checking build, installed as
# librubygc.mosaic_check.so, with MOSAIC_STRESS_MINOR forcing a collection every N allocations.
# These tests assert things that forced collections or the library's file name change by
# design, not GC correctness; each runs in the normal gates (mosaic and default) unexcluded.
exclude(:test_gc_config_implementation, "expects GC.config[:implementation] to equal RUBY_GC_LIBRARY (mosaic_check); the checking build names itself mosaic")
exclude(:test_latest_gc_info, "expects gc_by :newobj after allocation; a forced collection says :stress")
exclude(:test_thrashing_for_young_objects, "counts major GCs over a loop; forced collections add their own")
exclude(:test_gc_parameter_init_slots, "asserts no GC before the init slots are used; forced collections run every N allocations (and it times out under them)")
exclude(:test_latest_gc_info_need_major_by, "allocates until need_major_by is set; the major GC it asks for starts (marking in steps) as soon as the sweep that holds pages back for it ends, which forced collections every N allocations make a matter of a few allocations, so the loop never sees it (it does under mosaic in the normal gates)")
