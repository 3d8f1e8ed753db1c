# Workload "binary-trees": the binary-trees GC classic. A long-lived tree of depth MAX stays live
# while many short-lived trees of depths 4, 6, ... MAX are built and checked (node count).
# Full: MAX = 18; --quick: MAX = 14. Reports seconds.
# Usage: ruby bench/workloads/binary_trees.rb [--quick]
require_relative "../lib/bench_support"

TreeNode = Struct.new(:left, :right)

def build_tree(depth)
  return TreeNode.new(nil, nil) if depth.zero?
  TreeNode.new(build_tree(depth - 1), build_tree(depth - 1))
end

def count_nodes(node)
  return 1 unless node.left
  1 + count_nodes(node.left) + count_nodes(node.right)
end

max_depth = Bench.size(18, 14)
min_depth = 4
seconds = Bench.time do
  stretch = count_nodes(build_tree(max_depth + 1))
  long_lived = build_tree(max_depth)
  checks = [stretch]
  min_depth.step(max_depth, 2) do |depth|
    rounds = 1 << (max_depth - depth + min_depth)
    total = 0
    rounds.times { total += count_nodes(build_tree(depth)) }
    checks << total
  end
  checks << count_nodes(long_lived)
  raise "binary trees: wrong node count" unless checks.last == (1 << (max_depth + 1)) - 1
end
Bench.figure("binary trees depth #{max_depth}", seconds, "s", better: :lower)
