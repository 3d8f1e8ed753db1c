# Workload "strings": the Variable Width Allocation microbenchmarks on 71-byte strings
# (String#==, String#*, String#[]=), in iterations per second. --quick runs each for less time.
# Usage: ruby bench/workloads/strings.rb [--quick]
require_relative "../lib/bench_support"

LEN = 71
a = "a" * LEN
b = "a" * LEN
Bench.ips("String#== (71 B)") { a == b }          # compares two distinct 71-byte strings
Bench.ips("String#* (71 B)") { "a" * LEN }        # allocates a new 71-byte string
s = "a" * LEN
Bench.ips("String#[]= (71 B)") { s[35] = "b" }    # modifies one byte in place
