# difftest regression (seed 1, shrunk): fork while another Ractor is alive (waiting in
# Ractor.receive); the child allocates, collects and runs GC.verify_internal_consistency.
# Buggy Mosaic: the child aborts ("N slots on the freelist but M free", "live slots found,
# counters say ..."). (CRuby's default GC fails here too; run.rb holds it to "ok".)
S.bg_start(1, 947645042)
S.fork_check(529827668)
