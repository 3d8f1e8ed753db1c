# Workload "hash-heavy": a hash-heavy program. Builds a table of word counts with string keys,
# groups records (small hashes) into nested hashes, merges and deletes keys, over several rounds,
# keeping the last round's tables alive. Full: 400k records x 5 rounds; --quick: 80k x 3. Seconds.
# Usage: ruby bench/workloads/hash_heavy.rb [--quick]
require_relative "../lib/bench_support"

records = Bench.size(400_000, 80_000)
rounds = Bench.size(5, 3)
WORDS = %w[alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi].freeze

kept = nil
seconds = Bench.time do
  rounds.times do |round|
    counts = Hash.new(0)
    by_group = Hash.new { |h, k| h[k] = {} }
    records.times do |i|
      word = "#{WORDS[i % WORDS.size]}-#{i % 5003}"
      counts[word] += 1
      record = { id: i, name: word, score: (i * 7919) % 1000, tags: { "round" => round, "odd" => i.odd? } }
      by_group[i % 1009][i] = record
    end
    by_group.each_value { |g| g.delete_if { |id, _| id % 3 == 0 } }
    merged = counts.select { |_, n| n > 10 }.merge(counts.transform_keys(&:upcase)) { |_, a, b| a + b }
    kept = [counts, by_group, merged]
  end
end
raise "hash-heavy: unexpected size" unless kept[1].size == 1009
Bench.figure("hash-heavy", seconds, "s", better: :lower)
