# Workload "ring": a ring of objects. A long-lived circular list of nodes, each holding a small
# payload; on every step a node's payload is replaced by a new one and some nodes are spliced
# out and replaced, so old nodes keep pointing to young objects (write-barrier and remembered-set
# work for a generational collector). Full: 100k nodes x 60 laps; --quick: 50k x 12. Seconds.
# Usage: ruby bench/workloads/ring.rb [--quick]
require_relative "../lib/bench_support"

RingNode = Struct.new(:next_node, :payload, :id)

size = Bench.size(100_000, 50_000)
laps = Bench.size(60, 12)

seconds = Bench.time do
  head = RingNode.new(nil, nil, 0)
  tail = head
  (1...size).each do |i|
    tail = tail.next_node = RingNode.new(nil, ["node", i], i)
  end
  tail.next_node = head

  node = head
  laps.times do |lap|
    size.times do |step|
      node.payload = [lap, step, "p#{step}"]
      if (step % 7).zero? # splice in a fresh node in place of the next one
        old = node.next_node
        node.next_node = RingNode.new(old.next_node, { lap: lap }, old.id)
      end
      node = node.next_node
    end
  end
  count = 1
  n = head.next_node
  until n.equal?(head)
    count += 1
    n = n.next_node
  end
  raise "ring: broken ring (#{count} nodes)" unless count == size
end
Bench.figure("ring", seconds, "s", better: :lower)
