# -*- ruby -*-
# Loaded by scripts/test-spec.sh (mspec -B) under every GC, in mspec and in each mspec-run child.
# It excludes nothing: it reports the GC each process really runs on, because the spec run's
# RUBY_DESCRIPTION is rewritten by the build's x86_64-linux-fake.rb and shows no +GC[...].
# stderr, since a child's stdout is its channel to the parent under -j.
$stderr.puts "mspec process runs on GC[#{GC.config[:implementation]}]"
# Exclusions for one GC go to test/spec-excludes/GC.mspec, each with its reason, as
#   MSpec.register(:exclude, "full spec description")  # reason
