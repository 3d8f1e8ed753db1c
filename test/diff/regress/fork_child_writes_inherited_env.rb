# difftest regression (seed 24, shrunk): a forked child whose churn stores young Strings in
# closure cells inherited from its parent (heap environments the VM writes without a write
# barrier while their WB_REQUIRED flag is clear). Before the fix in mosaic_promote_all the
# child aborted: the fork made the environments old and dropped their remembered bits.
# Steps only; run.rb --regress runs it after test/diff/prelude.rb and compares with default.
S.churn(666, 1)
S.bg_start(1, 110361177)
S.churn(1, 1)
S.fork_check(537403764)
