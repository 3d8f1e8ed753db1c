# Workload "splay": a splay tree whose nodes are replaced over time, in the manner of the V8/Octane
# Splay benchmark. The tree holds 20k nodes (quick: 8k) keyed by random floats; each node's payload
# is a complete binary tree of small Hashes of depth 4 whose 16 leaves each hold a 10-element Array
# and a String naming the key (63 objects, about 7 KB, per node: 1.3M live objects, about 130 MiB;
# quick 500k, 53 MiB). Then 120k modifications (quick 20k): insert a node with a fresh random key
# and a new payload, and remove the node with the greatest key below it (or the new node itself when
# there is none), so the tree keeps its size while its nodes, old by then, die one by one and new
# ones take their place. Every operation splays, so the old nodes near the root keep getting young
# children (old-to-young stores). Reports the seconds of the modifications and, as Octane's
# SplayLatency does, the time of the slowest batch of 1000 modifications and the p99 batch (ms): a
# GC pause inside a batch shows there.
# Usage: ruby bench/workloads/splay.rb [--quick]
require_relative "../lib/bench_support"

# A top-down splay tree (Sleator and Tarjan): every operation first splays the key's node, or
# the last node on its search path, to the root.
class SplayTree
  Node = Struct.new(:key, :value, :left, :right)

  attr_reader :root, :size

  def initialize
    @root = nil
    @size = 0
  end

  def empty? = @root.nil?

  # Inserts key => value unless the key is there already; returns whether it inserted.
  def insert(key, value)
    if @root.nil?
      @root = Node.new(key, value, nil, nil)
      @size = 1
      return true
    end
    splay(key)
    return false if @root.key == key
    node = Node.new(key, value, nil, nil)
    if key > @root.key
      node.left = @root
      node.right = @root.right
      @root.right = nil
    else
      node.right = @root
      node.left = @root.left
      @root.left = nil
    end
    @root = node
    @size += 1
    true
  end

  # Removes the node of key and returns it (nil when absent).
  def remove(key)
    return nil if @root.nil?
    splay(key)
    return nil unless @root.key == key
    removed = @root
    if removed.left.nil?
      @root = removed.right
    else
      right = removed.right
      @root = removed.left
      splay(key) # the greatest key of the left subtree comes up: it has no right child
      @root.right = right
    end
    @size -= 1
    removed
  end

  def find(key)
    return nil if @root.nil?
    splay(key)
    @root.key == key ? @root : nil
  end

  # The node with the greatest key below key, or nil.
  def find_greatest_less_than(key)
    return nil if @root.nil?
    splay(key)
    return @root if @root.key < key
    node = @root.left
    return nil unless node
    node = node.right while node.right
    node
  end

  # In-order keys (for the check at the end).
  def each_key
    stack = []
    node = @root
    while node || !stack.empty?
      while node
        stack << node
        node = node.left
      end
      node = stack.pop
      yield node.key
      node = node.right
    end
  end

  private

  # Top-down splay: the left tree collects nodes below key, the right tree nodes above it;
  # `header` stands for both trees' roots until the end.
  def splay(key)
    header = Node.new(nil, nil, nil, nil)
    left = right = header
    current = @root
    loop do
      if key < current.key
        break unless current.left
        if key < current.left.key # rotate right
          child = current.left
          current.left = child.right
          child.right = current
          current = child
          break unless current.left
        end
        right.left = current # link right
        right = current
        current = current.left
      elsif key > current.key
        break unless current.right
        if key > current.right.key # rotate left
          child = current.right
          current.right = child.left
          child.left = current
          current = child
          break unless current.right
        end
        left.right = current # link left
        left = current
        current = current.right
      else
        break
      end
    end
    left.right = current.left
    right.left = current.right
    current.left = header.right
    current.right = header.left
    @root = current
  end
end

tree_size = Bench.size(20_000, 8_000)
modifications = Bench.size(120_000, 20_000)
payload_depth = 4
batch = 1000
rng = Random.new(2_718_281)

def payload(depth, tag)
  return { array: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], string: "leaf of #{tag}" } if depth.zero?
  { left: payload(depth - 1, tag), right: payload(depth - 1, tag) }
end

tree = SplayTree.new
insert_new = lambda do
  key = rng.rand
  key = rng.rand while tree.find(key)
  tree.insert(key, payload(payload_depth, key))
  key
end

build = Bench.time { tree_size.times { insert_new.call } }

batch_times = []
seconds = Bench.time do
  (modifications / batch).times do
    t = Bench.now
    batch.times do
      key = insert_new.call
      greatest = tree.find_greatest_less_than(key)
      tree.remove(greatest ? greatest.key : key)
    end
    batch_times << Bench.now - t
  end
end

# The tree is whole and ordered, and its payloads intact (outside the timed loop).
count = 0
last = -1.0
tree.each_key do |k|
  raise "splay: keys out of order" unless k > last
  last = k
  count += 1
end
raise "splay: #{count} nodes, expected #{tree_size}" unless count == tree_size && tree.size == tree_size
leaf = tree.root.value
leaf = leaf[:left] until leaf.key?(:string)
raise "splay: payload lost" unless leaf[:string] == "leaf of #{tree.root.key}" && leaf[:array].size == 10

sorted = batch_times.sort
p99 = sorted[[(0.99 * sorted.size).ceil - 1, 0].max]
puts format("  (%d nodes of %d payload objects each, built in %.2f s; %d modifications in batches of %d)",
            tree_size, (2 << payload_depth) - 1 + (2 << payload_depth), build, modifications, batch)
Bench.figure("splay", seconds, "s", better: :lower)
Bench.figure("splay batch max", sorted.last * 1000.0, "ms", better: :lower)
Bench.figure("splay batch p99", p99 * 1000.0, "ms", better: :lower)
