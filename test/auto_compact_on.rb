# Loaded with RUBYOPT=-r<this file> by the "compact" gate (scripts/test.sh; given to make's
# command line as well, since CRuby's common.mk sets RUBYOPT = - for its children): every Ruby of a
# test-all run, children included (RUBYOPT is inherited), starts with GC.auto_compact = true,
# so every major GC compacts, under Mosaic and the default GC alike.
GC.auto_compact = true
