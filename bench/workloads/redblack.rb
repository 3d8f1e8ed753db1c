# Workload "redblack": a red-black tree (left-leaning, Sedgewick) of integer keys: insert many
# pseudo-random keys, look them all up, then rebuild it several times so old trees become garbage.
# Full: 200k keys x 6 rounds; --quick: 50k x 3. Seconds.
# Usage: ruby bench/workloads/redblack.rb [--quick]
require_relative "../lib/bench_support"

class RedBlackTree
  Node = Struct.new(:key, :value, :left, :right, :red)

  attr_reader :size

  def initialize
    @root = nil
    @size = 0
  end

  def []=(key, value)
    @root = insert(@root, key, value)
    @root.red = false
  end

  def [](key)
    n = @root
    while n
      c = key <=> n.key
      return n.value if c.zero?
      n = c.negative? ? n.left : n.right
    end
    nil
  end

  def black_height_ok?(n = @root) = check(n) >= 0

  private

  def red?(n) = n&.red

  def insert(n, key, value)
    unless n
      @size += 1
      return Node.new(key, value, nil, nil, true)
    end
    c = key <=> n.key
    if c.negative? then n.left = insert(n.left, key, value)
    elsif c.positive? then n.right = insert(n.right, key, value)
    else n.value = value
    end
    n = rotate_left(n) if red?(n.right) && !red?(n.left)
    n = rotate_right(n) if red?(n.left) && red?(n.left.left)
    flip(n) if red?(n.left) && red?(n.right)
    n
  end

  def rotate_left(n)
    x = n.right
    n.right = x.left
    x.left = n
    x.red = n.red
    n.red = true
    x
  end

  def rotate_right(n)
    x = n.left
    n.left = x.right
    x.right = n
    x.red = n.red
    n.red = true
    x
  end

  def flip(n)
    n.red = !n.red
    n.left.red = !n.left.red
    n.right.red = !n.right.red
  end

  def check(n) # black height, or -1 when unbalanced
    return 0 unless n
    l = check(n.left)
    r = check(n.right)
    return -1 if l.negative? || l != r
    l + (n.red ? 0 : 1)
  end
end

keys = Bench.size(200_000, 50_000)
rounds = Bench.size(6, 3)
seconds = Bench.time do
  rounds.times do |round|
    tree = RedBlackTree.new
    x = round + 1
    keys.times do
      x = (x * 1_103_515_245 + 12_345) & 0x7fffffff
      tree[x] = "v#{x}"
    end
    x = round + 1
    keys.times do
      x = (x * 1_103_515_245 + 12_345) & 0x7fffffff
      raise "redblack: lost key #{x}" unless tree[x] == "v#{x}"
    end
    raise "redblack: unbalanced" unless tree.black_height_ok?
  end
end
Bench.figure("red-black tree", seconds, "s", better: :lower)
