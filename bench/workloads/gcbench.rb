# Workload "gcbench": the Ellis-Kovac-Boehm GCBench. A long-lived binary tree and a long-lived
# array of floats stay live while trees of depths 4..16 are built top-down (fill an empty tree)
# and bottom-up (children first), many times each. Full: long-lived depth 16, trees up to 16;
# --quick: 14 and 12. Reports seconds.
# Usage: ruby bench/workloads/gcbench.rb [--quick]
require_relative "../lib/bench_support"

class GCNode
  attr_accessor :left, :right, :i, :j
  def initialize(left = nil, right = nil)
    @left = left
    @right = right
    @i = 0
    @j = 0
  end
end

def tree_size(depth) = (1 << (depth + 1)) - 1

def populate(depth, node) # top-down
  return if depth <= 0
  node.left = GCNode.new
  node.right = GCNode.new
  populate(depth - 1, node.left)
  populate(depth - 1, node.right)
end

def make_tree(depth) # bottom-up
  depth <= 0 ? GCNode.new : GCNode.new(make_tree(depth - 1), make_tree(depth - 1))
end

stretch_depth = Bench.size(18, 14)
long_lived_depth = Bench.size(16, 14)
max_depth = Bench.size(16, 12)
array_size = Bench.size(500_000, 100_000)

seconds = Bench.time do
  make_tree(stretch_depth) # stretch the heap
  long_lived = GCNode.new
  populate(long_lived_depth, long_lived)
  floats = Array.new(array_size) { |i| 1.0 / (i + 1) }
  4.step(max_depth, 2) do |depth|
    iterations = 2 * tree_size(stretch_depth) / tree_size(depth)
    iterations.times do
      populate(depth, GCNode.new)
      make_tree(depth)
    end
  end
  raise "gcbench: long-lived data lost" unless long_lived.left && floats[1000] == 1.0 / 1001
end
Bench.figure("GCBench", seconds, "s", better: :lower)
