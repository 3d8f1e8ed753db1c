# difftest regression (seed 56 under mosaic_check_steps, reduced to the 20 lines below; shrink.rb
# keeps their first five, which fail about one run in ten, the 20 about two runs in five, so
# all stay). Each ractor_bulk: a Ractor writes into old containers
# while an incremental major it started marks (GC.start(full_mark: true, immediate_mark:
# false)); meanwhile the main Ractor runs minor GCs, which finish that mark, and writes into
# its own containers. Buggy Mosaic, mosaic_check and mosaic_check_steps alike: the verifier
# aborts with "[mosaic verify] X (type 0x7) refers to Y, a dead slot (type 0x0)" (or "old X
# refers to young Y but is not remembered"), then "[BUG] Mosaic: heap verification found N
# problems" (or "the tri-color invariant does not hold between incremental steps"). Not with
# immediate_mark: true, not without the main Ractor's minor GCs, not without the Ractor's own
# incremental majors; bulk writes are not needed (element-by-element writes fail too). The
# default GC passes. Steps only; run.rb --regress runs it after test/diff/prelude.rb.
S.ractor_bulk(0, 100, 17, 90)
S.ractor_bulk(1, 100, 17, 91)
S.ractor_bulk(2, 100, 17, 92)
S.ractor_bulk(3, 100, 17, 93)
S.ractor_bulk(4, 100, 17, 94)
S.ractor_bulk(5, 100, 17, 95)
S.ractor_bulk(6, 100, 17, 96)
S.ractor_bulk(7, 100, 17, 97)
S.ractor_bulk(8, 100, 17, 98)
S.ractor_bulk(9, 100, 17, 99)
S.ractor_bulk(10, 100, 17, 910)
S.ractor_bulk(11, 100, 17, 911)
S.ractor_bulk(0, 100, 17, 912)
S.ractor_bulk(1, 100, 17, 913)
S.ractor_bulk(2, 100, 17, 914)
S.ractor_bulk(3, 100, 17, 915)
S.ractor_bulk(4, 100, 17, 916)
S.ractor_bulk(5, 100, 17, 917)
S.ractor_bulk(6, 100, 17, 918)
S.ractor_bulk(7, 100, 17, 919)
