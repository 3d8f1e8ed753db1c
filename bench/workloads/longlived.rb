# Workload "longlived": a large long-lived tree plus steady young garbage. A complete binary tree
# of 2^20 - 1 (about 1M) nodes (--quick: 2^17 - 1, about 131k), each node a 3-member Struct
# holding a short string, is built once and stays live for the whole run (and through exit, so the
# probe's memory breakdown sees it). The main loop then allocates short-lived strings, arrays and
# hashes; about 1% of them are stored into a random node of the tree, replacing its older payload,
# so old objects keep pointing to young ones (write barrier, remembered set) and old payloads keep
# dying. Full: 8M iterations; --quick: 600k. Reports the seconds of the main loop.
# Usage: ruby bench/workloads/longlived.rb [--quick]
require_relative "../lib/bench_support"

LongLivedNode = Struct.new(:left, :right, :payload)

def build_tree(depth, counter)
  counter[0] += 1
  node = LongLivedNode.new(nil, nil, "node-#{counter[0]}")
  return node if depth.zero?
  node.left = build_tree(depth - 1, counter)
  node.right = build_tree(depth - 1, counter)
  node
end

depth = Bench.size(19, 16)
iterations = Bench.size(8_000_000, 600_000)
rng = Random.new(42)

counter = [0]
# A constant, so the tree stays reachable until the process exits.
LONG_LIVED_TREE = build_tree(depth, counter)
nodes = counter[0]

stores = 0
seconds = Bench.time do
  iterations.times do |i|
    s = "item #{i}"
    a = [i, s, i & 0xff]
    h = { id: i, name: s, list: a }
    next unless rng.rand(100).zero?

    # store into a random node: walk down from the root, one random bit per level
    node = LONG_LIVED_TREE
    bits = rng.rand(1 << depth)
    rng.rand(depth + 1).times do
      node = bits.odd? ? node.right : node.left
      bits >>= 1
    end
    node.payload = i.odd? ? h : a
    stores += 1
  end
end

# Check the tree is whole (outside the timed loop).
count = 0
stack = [LONG_LIVED_TREE]
while (node = stack.pop)
  count += 1
  raise "longlived: node without payload" unless node.payload
  if node.left
    stack << node.left << node.right
  end
end
raise "longlived: tree has #{count} nodes, expected #{nodes}" unless count == nodes && nodes == (1 << (depth + 1)) - 1

puts "  (#{nodes} long-lived nodes, #{iterations} iterations, #{stores} stores into the tree)"
Bench.figure("longlived main loop", seconds, "s", better: :lower)
