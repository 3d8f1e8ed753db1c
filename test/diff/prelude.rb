# ---- Mosaic difftest prelude (test/diff/prelude.rb) ----
# A difftest program is this prelude followed by steps, one call per line, between the
# "#@@ steps" and "#@@ end" markers. Every step is robust to any other step being removed
# (the shrinker deletes lines), and everything printed to stdout is a fact the language
# guarantees, never GC timing: the same program must print the same bytes under any GC.
# Self-checks print "ERR ..." lines; a digest line at each checkpoint covers the contents.
$stdout.sync = true
Warning[:experimental] = false

# Reach: which of the collector's mechanisms this run exercised, for run.rb's summary; never
# on stdout, which must not depend on the GC. With MOSAIC_DIFFTEST_REACH=PATH (run.rb sets it
# for every GC but default) each process appends one line to PATH: "pid=N key=value ...", a
# value "-" where the GC has no such figure (GC.stat(key) raises ArgumentError for a key it
# does not know). The program's process writes at exit (this at_exit, registered first, runs
# last), a forked child before it exits, with its figures since the fork. $reach counts what
# the program does itself: forks, forks right after a lazy GC (the sweep still going), bulk
# writes made while GC.latest_gc_info(:state) said :marking.
module DTReach
  STATS = { incremental_marks: :mosaic_incremental_marks, steps: :mosaic_incremental_steps,
            parallel_marks: :mosaic_parallel_marks, parallel_steps: :mosaic_incremental_parallel_steps,
            bg_sweeps: :mosaic_background_sweeps, compactions: :compact_count,
            regreys: :mosaic_incremental_retraced_objects, race_delays: :mosaic_race_delays }.freeze
  MAXES = { regrey_queue_max: :mosaic_incremental_retrace_queue_max }.freeze
  PATH = ENV["MOSAIC_DIFFTEST_REACH"]&.dup&.freeze

  def self.stat(key)
    GC.stat(key)
  rescue ArgumentError
    nil
  end

  def self.figures = STATS.merge(MAXES).transform_values { |k| stat(k) }

  # since: the figures at a fork (a child reports only its own work).
  def self.write(since = nil)
    return unless PATH
    f = figures
    since&.each { |k, v| f[k] -= v if STATS.key?(k) && f[k] && v }
    f.merge!(forks: $reach[:forks], lazy_forks: $reach[:lazy_forks], bulk_in_mark: $reach[:bulk_in_mark])
    line = "pid=#{Process.pid} #{f.map { |k, v| "#{k}=#{v.nil? ? '-' : v}" }.join(' ')}\n"
    File.open(PATH, "a") { |io| io.write(line) }
  rescue SystemCallError, IOError
    nil
  end
end
$reach = Hash.new(0)
at_exit { DTReach.write } if DTReach::PATH

require "zlib"
# Loaded before any Ractor runs: ext/objspace's allocation tracing set up after a Ractor has run
# misses most allocations (CRuby 3.4.5, under either GC; how many depends on when GCs happen).
require "objspace"

# Tagged objects: keys and values of weak maps, pool objects. Every one has a unique tag @t.
module DTTagged
  def t = @t
end
class DTKey
  include DTTagged
  def initialize(t, extra = 0)
    @t = t
    extra.times { |i| instance_variable_set(:"@x#{i}", i * 3) }
  end
end
class DTVal
  include DTTagged
  def initialize(t, extra = 0)
    @t = t
    extra.times { |i| instance_variable_set(:"@y#{i}", "v#{i}") }
  end
end
class DTStr < String
  include DTTagged
  def self.make(t) = new(B.kstr(t)).tap { |s| s.instance_variable_set(:@t, t) }
end
class DTNode; end
class DTCell
  attr_accessor :v, :n
  def initialize(v, n) = (@v = v; @n = n)
end
class DTList
  attr_accessor :head, :len
  def initialize(head, len) = (@head = head; @len = len)
end
class DTFin
  def initialize(t, extra) = (@t = t; extra.times { |i| instance_variable_set(:"@f#{i}", i) })
end
class DTCounted
  def initialize(i) = (@i = i)
end
# The smallest fiber scheduler sched_stress needs: fibers wait for readable IOs (io_wait),
# sleep or block on a Mutex or Queue (kernel_sleep, block, unblock); closing the scheduler at
# the end of its thread runs them all to completion.
class DTScheduler
  def initialize
    @root = Fiber.current
    @readable = {}
    @ready = []
    @lock = Thread::Mutex.new
    @urgent = IO.pipe
  end

  def fiber(&block)
    f = Fiber.new(blocking: false, &block)
    f.transfer
    f
  end

  def io_wait(io, events, _timeout)
    @readable[io] = Fiber.current
    @root.transfer
    events
  ensure
    @readable.delete(io)
  end

  def kernel_sleep(_duration = nil)
    @lock.synchronize { @ready << Fiber.current }
    @root.transfer
    true
  end

  def block(_blocker, _timeout = nil)
    @root.transfer
  end

  def unblock(_blocker, fiber)
    @lock.synchronize { @ready << fiber }
    @urgent.last.write_nonblock(".")
  end

  def scheduler_close
    until @readable.empty? && @ready.empty?
      ready = @lock.synchronize { r = @ready; @ready = []; r }
      ready.each { |f| f.transfer if f.alive? }
      next if @readable.empty?
      rs, = IO.select(@readable.keys + [@urgent.first], nil, nil, 1)
      rs&.each do |io|
        if io == @urgent.first then io.read_nonblock(64, exception: false)
        elsif (f = @readable.delete(io)) then f.transfer
        end
      end
    end
  ensure
    @urgent.each(&:close)
  end
end

DTPoint = Struct.new(:x, :y, :z)
DTData = Data.define(:a, :b)
# A Struct wide enough to need a 320-byte slot (bulk containers).
DTWide = Struct.new(*Array.new(20) { |i| :"w#{i}" })
# Objects held by a "held" bundle (S.held): found by each_object, keyed by identity.
class DTHeld
  include DTTagged
  attr_accessor :a, :b
  def initialize(t, a, b) = (@t = t; @a = a; @b = b)
end

# B: pure builders and the digest; no global state, so Ractors can use them too.
module B
  MASK = 0xffffffff
  def self.mix(h, v) = (((h ^ (v & MASK)) * 16777619) & MASK)
  def self.crc(s) = Zlib.crc32(s)
  def self.kstr(t) = "k#{t}-#{'x' * (t % 37)}"
  # Lengths around the embedding limits of 40/80/160/320/640-byte slots.
  STR_LENS = [0, 1, 7, 15, 16, 23, 24, 40, 55, 56, 63, 64, 100, 135, 136, 200, 295, 296, 400, 615, 616, 1000, 3000].freeze
  ARY_LENS = [0, 1, 2, 3, 4, 5, 8, 9, 17, 18, 19, 38, 39, 40, 77, 78, 79, 120, 300].freeze

  def self.str(r, len)
    s = r.bytes((len + 1) / 2).unpack1("H*")[0, len]
    s = s.b if r.rand(8) == 0
    s
  end

  def self.leaf(r, depth = 0)
    case r.rand(24)
    when 0 then nil
    when 1 then r.rand(1 << 30)
    when 2 then (1 << (64 + r.rand(200))) + r.rand(1000)          # bignum
    when 3 then r.rand * 10.0                                     # flonum
    when 4 then 1.0e300 * (r.rand + 1)                            # heap float
    when 5 then :"dsym_#{r.rand(300)}"                            # dynamic symbol
    when 6 then :static_sym
    when 7 then Rational(r.rand(100) + 1, r.rand(7) + 1)
    when 8 then Complex(r.rand(9), r.rand(9))
    when 9 then (r.rand(50)..r.rand(100))
    when 10 then DTPoint.new(str(r, 5), r.rand(9), nil)
    when 11 then DTData.new(a: str(r, 20), b: r.rand(5))
    when 12 then str(r, 3).freeze
    when 13 then obj(r, r.rand(12), depth + 1)
    when 14 then depth < 2 ? ary(r, ARY_LENS.sample(random: r), depth + 1) : 0
    when 15 then depth < 2 ? hash(r, r.rand(12), depth + 1) : 1
    else str(r, STR_LENS.sample(random: r))
    end
  end

  def self.ary(r, len, depth = 0) = Array.new(len) { leaf(r, depth + 1) }

  def self.hkey(r, i)
    case r.rand(4)
    when 0 then "hk#{i}-#{r.rand(1000)}"
    when 1 then i * 7919 + r.rand(7)
    when 2 then :"hsym_#{i}_#{r.rand(50)}"
    else str(r, 10 + r.rand(30))
    end
  end

  def self.hash(r, n, depth = 0)
    h = {}
    n.times { |i| h[hkey(r, i)] = leaf(r, depth + 1) }
    h
  end

  def self.ivname(r, i) = r.rand(5) == 0 ? :"@j#{r.rand(40)}" : :"@i#{i}"

  def self.obj(r, nivars, depth = 0)
    o = DTNode.new
    nivars.times { |i| o.instance_variable_set(ivname(r, i), leaf(r, depth + 1)) }
    o
  end

  def self.list(r, depth)
    head = nil
    depth.times { |i| head = DTCell.new(i % 7 == 0 ? str(r, r.rand(30)) : i, head) }
    DTList.new(head, depth)
  end

  def self.tree(r, depth)
    return leaf(r, 3) if depth == 0 || r.rand(9) == 0
    [tree(r, depth - 1), tree(r, depth - 1), r.rand(100)]
  end

  def self.wide(r, n)
    Array.new(n) do |i|
      case i % 4
      when 0 then "w#{i}"
      when 1 then [i, "e#{i}"]
      when 2 then DTNode.new.tap { |o| o.instance_variable_set(:@w, i) }
      else str(r, STR_LENS.sample(random: r))
      end
    end
  end

  # A structure for threads and Ractors (no procs, classes or other unshareable oddities).
  def self.build(r, size)
    case r.rand(5)
    when 0 then ary(r, size)
    when 1 then hash(r, size)
    when 2 then list(r, size * 4)
    when 3 then wide(r, size * 4)
    else obj(r, size % 90)
    end
  end

  # ---- bulk writes ----
  # CRuby writes some containers in bulk and reports only "obj changed" to the GC
  # (rb_gc_writebarrier_remember): Array#concat, #[]= with a range or a length, push(*x),
  # #insert, #unshift of more than 16 elements (array.c ary_memcpy0: one report per copy of
  # more than 128 bytes), an array that shared a buffer copying it before its first write
  # (rb_ary_modify after #replace with a heap array), Hash#replace and #rehash (ar_copy,
  # st_replace), Hash#keys/#values, and the VM's first write to an old environment
  # (vm_env_write_slowpath). Others write element by element through the write barrier
  # (#fill, #map!, Struct#initialize_copy, #dup's ivar copy): both kinds are made here, on
  # containers made old by the caller, with young objects nothing else refers to.

  # A fresh String, unique by the counter c[0], across the 40/80/160-byte slot sizes.
  def self.bstr(c) = "b#{c[0] += 1}-#{'q' * (c[0] % 67)}"

  # A fresh young object of some kind.
  def self.yng(r, c)
    case r.rand(8)
    when 0 then [bstr(c), r.rand(99)]
    when 1 then DTPoint.new(bstr(c), r.rand(9), nil)
    when 2 then { bstr(c) => bstr(c) }
    when 3 then leaf(r, 2)
    when 4 then obj(r, 1 + r.rand(6), 2)
    else bstr(c)
    end
  end

  def self.cell(v) = [-> { v }, ->(x) { v = x }]

  # Containers for bulk_op, across the embedded/heap and ar/st-table limits: 0 the counter,
  # 1 Strings only (sorted), 2 a mixed heap Array, 3 an Array sharing 4's buffer, 4 an Array,
  # 5 a Hash with an ar table (at most 8 entries), 6 one with an st table, 7 an identity Hash,
  # 8 a wide Struct, 9 an object with many ivars, 10 closure cells (a getter and a setter
  # lambda over a local of a heap environment), 11 a small Array.
  def self.bulk_set(r, c = [0])
    base = Array.new(60) { bstr(c) }
    idh = {}.compare_by_identity
    10.times { idh[bstr(c)] = yng(r, c) }
    [c, Array.new(40) { bstr(c) }, Array.new(50) { yng(r, c) }, base[5..], base, { bstr(c) => 1 },
     Array.new(30) { [bstr(c), yng(r, c)] }.to_h, idh, DTWide.new(*Array.new(20) { yng(r, c) }),
     obj(r, 30), Array.new(8) { cell(bstr(c)) }, [bstr(c), 2]]
  end

  BULK_OPS = 24

  # One write into the containers of s (bulk_set) with k young objects (more than 16: a bulk
  # copy), then the containers trimmed back to their bounds. Deterministic given r.
  def self.bulk_op(s, r, k, op = r.rand(BULK_OPS))
    c = s[0]
    young = Array.new(k) { yng(r, c) }
    case op
    when 0 then s[1].concat(Array.new(k) { bstr(c) })
    when 1 then s[2].concat(young, [yng(r, c)])
    when 2 then s[2][r.rand(s[2].size + 1), r.rand(5)] = young
    when 3 then s[2][r.rand(s[2].size + 1)..] = young
    when 4 then s[2].push(*young)
    when 5 then s[2].insert(r.rand(s[2].size + 1), *young)
    when 6 then s[1].unshift(*Array.new(k) { bstr(c) })
    when 7
      s[3].replace(young + Array.new(80) { bstr(c) })   # a heap Array: s[3] shares its buffer,
      s[3] << bstr(c)                                    # then copies it (rb_ary_modify)
    when 8
      s[4][r.rand(s[4].size)] = bstr(c)
      s[3] = s[4][r.rand(10)..]
    when 9 then r.rand(2) == 0 ? s[2].fill { yng(r, c) } : s[2].fill(yng(r, c), 0, [k, s[2].size].min)
    when 10 then s[2].map! { |x| r.rand(3) == 0 ? x : yng(r, c) }
    when 11
      s[1].sort!
      s[1].reverse! if r.rand(2) == 0
    when 12
      s[2].rotate!(r.rand(7))
      s[2].shuffle!(random: r)
    when 13 then s[5].replace(Array.new([k, 8].min) { [bstr(c), yng(r, c)] }.to_h)
    when 14 then s[6].replace(Array.new(k + 9) { [bstr(c), yng(r, c)] }.to_h)
    when 15 then s[6].update(Array.new(k) { [bstr(c), yng(r, c)] }.to_h)
    when 16
      s[5][bstr(c)] = yng(r, c)
      s[6][bstr(c)] = yng(r, c)
      s[5].rehash
      s[6].rehash
    when 17 then s[7].merge!(young.to_h { |x| [x, bstr(c)] })
    when 18 then s[8].send(:initialize_copy, DTWide.new(*Array.new(20) { yng(r, c) }))
    when 19 then [k, 40].min.times { s[9].instance_variable_set(:"@b#{r.rand(48)}", yng(r, c)) }
    when 20 then s[10].each { |_, set| set.call(bstr(c)) }
    when 21
      s[2].replace(s[6].values.first(k) + young)
      s[11].replace(s[5].keys)
    when 22 then s[2] << s[9].dup << s[8].dup << s[5].dup << young.dup
    else
      s[11].replace(young.first(3))
      s[1].concat(Array.new(k) { bstr(c) }, Array.new(k) { bstr(c) })
    end
    bulk_trim(s)
  end

  def self.bulk_trim(s)
    s[1].slice!(0, s[1].size - 300) if s[1].size > 300
    s[2].pop(s[2].size - 200) if s[2].size > 200
    s[3].pop(s[3].size - 120) if s[3].size > 120
    s[5].shift while s[5].size > 8
    s[6].shift while s[6].size > 100
    s[7].shift while s[7].size > 60
    ivs = s[9].instance_variables
    ivs.first(20).each { |iv| s[9].remove_instance_variable(iv) } if ivs.size > 60
  end

  # A deterministic 32-bit digest of everything reachable from root: contents, shapes and the
  # sharing structure (a second visit hashes the first visit's ordinal), never addresses or
  # the process-seeded #hash. Iterative, so million-deep lists are fine.
  def self.dig(root)
    h = 2166136261
    seen = {}.compare_by_identity
    n = 0
    st = [root]
    until st.empty?
      o = st.pop
      case o
      when nil then h = mix(h, 1); next
      when true then h = mix(h, 2); next
      when false then h = mix(h, 3); next
      when Integer then h = mix(mix(h, 4), o % 4294967291); next
      when Float then h = mix(mix(h, 5), crc(o.to_s)); next
      when Symbol then h = mix(mix(h, 6), crc(o.name)); next
      end
      if (k = seen[o])
        h = mix(mix(h, 7), k)
        next
      end
      seen[o] = (n += 1)
      case o
      when String then h = mix(mix(mix(mix(h, 8), crc(o)), o.bytesize), crc(o.encoding.name))
      when Array then h = mix(mix(h, 9), o.size); st.concat(o)
      when Hash
        h = mix(mix(h, 10), o.size)
        h = mix(h, 11) if o.compare_by_identity?
        o.each { |kk, vv| st << kk << vv }
      when Struct then h = mix(h, 12); st.concat(o.to_a)
      when Data then h = mix(h, 13); st.concat(o.to_h.values)
      when Range then h = mix(h, o.exclude_end? ? 14 : 15); st << o.begin << o.end
      when Rational, Complex then h = mix(mix(h, 16), crc(o.to_s))
      when Proc then h = mix(h, 17); st << o.call if o.lambda? && o.arity == 0
      when Thread::Queue then h = mix(mix(h, 18), o.size)
      when Exception then h = mix(mix(h, 19), crc(o.message))
      when Regexp then h = mix(mix(h, 20), crc(o.source))
      when Module
        h = mix(h, 21)
        o.constants(false).sort.each { |c| h = mix(h, crc(c.name)); st << o.const_get(c) }
      else
        h = mix(mix(h, 22), crc(o.class.name || "anon"))
      end
      ivs = o.instance_variables
      unless ivs.empty?
        h = mix(h, ivs.size)
        ivs.each { |iv| h = mix(h, crc(iv.name)); st << o.instance_variable_get(iv) }
      end
    end
    h
  end
end

# S: the program's state (root slots, weak-map models, finalizer bookkeeping) and the steps.
module S
  Entry = Struct.new(:kind, :obj, :dig, :id, :fintag, :idents)
  WModel = Struct.new(:held, :last, :eph_total, :eph_keys, :eph_held_keys, :keep)
  MUTABLE = %i[str ary hash obj list tree wide misc].freeze
  # Kinds whose digest is taken when put and checked at every checkpoint.
  DIGESTED = (MUTABLE + %i[frozen bulk]).freeze
  $slots = []
  $pool = []
  $pool_set = {}.compare_by_identity
  $tag = 0
  $dead = []              # [object id, digest] of dropped slot objects
  $fin_ids = {}           # tag => object id
  $fin_live = {}          # tag => true while strongly held
  $fin_undef = {}         # tag => true once undefined
  $fin_ran = Hash.new(0)  # tag => times run
  $fin_defined = 0
  $fin_bad = []
  $fin_done = false
  $exiting = false
  $nursery = Array.new(256)
  $nursery_k = Array.new(256)
  $nursery_i = 0
  # Closure cells: a getter and a setter lambda over one local of a heap environment, which
  # churn points at a fresh young String now and then. The VM writes to an environment without
  # a write barrier while its WB_REQUIRED flag is clear (it remembered the environment when it
  # cleared the flag): a GC that makes objects old without tracing them must keep that working
  # (a forked child lost such Strings before the fix in generation.c, mosaic_promote_all).
  $cells = Array.new(64)
  $cells_k = Array.new(64)
  $counted = []
  $counted_dropped = 0
  $multi_ractor = false
  $bg = {}                # slot => Ractor (long-lived)
  $checks = 0
  $errs = nil             # an Array while collecting errors quietly (fork child)

  def self.tag = ($tag += 1)
  def self.rng(seed) = Random.new(seed)

  def self.err(msg)
    if $errs then $errs << msg else puts "ERR #{msg}" end
  end

  def self.out(msg)
    puts msg unless $errs
  end

  def self.get(slot, kinds = nil)
    e = $slots[slot]
    return nil unless e
    return nil if kinds && !kinds.include?(e.kind)
    e
  end

  def self.snap(e)
    e.idents.map! { |x, id, _| [x, id, B.dig(x)] } if e.idents.is_a?(Array) && e.kind != :fin
    e.dig = B.dig(e.obj)
  end

  # Replaces slot's content. The old object, if any, becomes garbage: remember its id.
  def self.put(slot, kind, obj)
    release(slot)
    e = Entry.new(kind, obj, nil, nil, nil, [])
    e.id = obj.object_id if slot.even?
    snap(e) if DIGESTED.include?(kind)
    $slots[slot] = e
  end

  def self.release(slot)
    e = $slots[slot]
    return unless e
    $fin_live.delete(e.fintag) if e.fintag
    e.idents.each { |t| $fin_live.delete(t) } if e.kind == :fin
    if e.id && e.dig && DIGESTED.include?(e.kind) && $dead.size < 64
      $dead << [e.id, e.dig]
    end
    if e.kind == :bg && (r = $bg.delete(slot))
      stop_bg(r)
    end
    release_held(e.obj) if e.kind == :held
    $slots[slot] = nil
  end

  # ---------------- structures ----------------

  def self.new_str(slot, len, seed)
    r = rng(seed)
    s = B.str(r, len)
    s = DTStr.make(tag) if len == 0 && r.rand(2) == 0
    put(slot, :str, s)
  end

  def self.new_ary(slot, len, seed) = put(slot, :ary, B.ary(rng(seed), len))
  def self.new_hash(slot, n, seed) = put(slot, :hash, B.hash(rng(seed), n))
  def self.new_obj(slot, n, seed) = put(slot, :obj, B.obj(rng(seed), n))
  def self.new_list(slot, depth, seed) = put(slot, :list, B.list(rng(seed), depth))
  def self.new_tree(slot, depth, seed) = put(slot, :tree, [B.tree(rng(seed), depth)])
  def self.new_wide(slot, n, seed) = put(slot, :wide, B.wide(rng(seed), n))

  def self.new_misc(slot, seed)
    r = rng(seed)
    captured = B.str(r, 30)
    klass = Class.new(DTNode)
    klass.instance_variable_set(:@civ, B.str(r, 50))
    klass.const_set(:K1, B.ary(r, 5))
    mod = Module.new
    mod.const_set(:M1, B.str(r, 200))
    q = Thread::Queue.new
    r.rand(10).times { q << B.leaf(r) }
    set = Set.new(Array.new(r.rand(20)) { |i| "set#{i}" })
    o = [klass, klass.new.tap { |x| x.instance_variable_set(:@m, B.str(r, 9)) }, mod,
         -> { captured }, q, set.to_a, set, RuntimeError.new(B.str(r, 40)), Regexp.new("a#{r.rand(99)}b"),
         DTPoint.new(B.leaf(r), B.leaf(r), B.leaf(r)), DTData.new(a: B.leaf(r), b: B.leaf(r)),
         (1 << 200) + r.rand(9999), B.hash(r, 9).compare_by_identity, 1.0e305, "frozen-#{r.rand(9)}".freeze]
    s = B.str(r, 20)
    s.instance_variable_set(:@gen, B.ary(r, 3))   # generic ivars on a String
    o << s
    put(slot, :misc, o)
  end

  def self.grow(slot, n, seed)
    e = get(slot, MUTABLE) or return
    o = e.obj
    return if o.frozen?
    r = rng(seed)
    case e.kind
    when :str then r.rand(2) == 0 ? (o << B.str(r, n)) : o.insert(r.rand(o.size + 1), B.str(r, n))
    when :ary, :wide
      case r.rand(4)
      when 0 then n.times { o << B.leaf(r) }
      when 1 then o.concat(B.ary(r, n))
      when 2 then n.times { o.unshift(B.leaf(r)) }
      else o.insert(r.rand(o.size + 1), *B.ary(r, n))
      end
    when :hash then n.times { |i| o[B.hkey(r, 1000 + i)] = B.leaf(r) }
    when :obj then n.times { |i| o.instance_variable_set(:"@g#{r.rand(n + 5)}", B.leaf(r)) }
    when :list
      (n * 10).times { |i| o.head = DTCell.new(i.even? ? B.str(r, r.rand(40)) : i, o.head) }
      o.len += n * 10
    when :tree then o << B.tree(r, 3)
    when :misc then o << B.leaf(r) << B.str(r, n)
    end
    snap(e)
  end

  def self.shrink(slot, n, seed)
    e = get(slot, MUTABLE) or return
    o = e.obj
    return if o.frozen?
    r = rng(seed)
    case e.kind
    when :str
      case r.rand(3)
      when 0 then o.slice!(0, n)
      when 1 then o.replace(o[0, [o.size - n, 0].max])
      else o.chop! while o.size > 0 && (n -= 1) >= 0
      end
    when :ary, :wide, :tree, :misc
      case r.rand(5)
      when 0 then o.pop(n)
      when 1 then o.shift(n)
      when 2 then o.slice!(r.rand(o.size + 1), n)
      when 3 then o.compact!
      else o.clear if r.rand(4) == 0
      end
    when :hash
      case r.rand(3)
      when 0 then n.times { o.shift }
      when 1 then o.keys.sample(n, random: r).each { |k| o.delete(k) }
      else o.reject! { |k, _| k.is_a?(Integer) }
      end
    when :obj
      o.instance_variables.sample(n, random: r).each { |iv| o.remove_instance_variable(iv) }
    when :list
      (n * 10).times { break unless o.head; o.head = o.head.n; o.len -= 1 }
    end
    snap(e)
  end

  # Old structures get young children (the write barrier's job).
  def self.mutate(slot, n, seed)
    e = get(slot, MUTABLE) or return
    o = e.obj
    return if o.frozen?
    r = rng(seed)
    case e.kind
    when :str
      n.times { o.setbyte(r.rand(o.bytesize), 97 + r.rand(26)) if o.bytesize > 0 }
      o.upcase! if r.rand(3) == 0
    when :ary, :wide, :misc
      n.times { o[r.rand(o.size)] = B.leaf(r) if o.size > 0 }
      o.rotate!(r.rand(5)) if r.rand(4) == 0
    when :hash
      ks = o.keys
      n.times { o[ks[r.rand(ks.size)]] = B.leaf(r) if ks.size > 0 }
    when :obj
      ivs = o.instance_variables
      n.times { o.instance_variable_set(ivs[r.rand(ivs.size)], B.leaf(r)) if ivs.size > 0 }
    when :list
      c = o.head
      i = 0
      while c
        c.v = B.str(r, r.rand(50)) if i % (n + 1) == 0
        c = c.n
        i += 1
      end
    when :tree
      n.times do
        next if o.empty?
        t = o
        i = r.rand(t.size)
        while t[i].is_a?(Array) && t[i].size == 3 && !t[i].frozen? && r.rand(6) != 0
          t = t[i]
          i = r.rand(2)
        end
        t[i] = B.tree(r, 2)
      end
    end
    snap(e)
  end

  def self.drop(slot) = release(slot)

  def self.move(a, b)
    e = $slots[a] or return
    return if a == b
    release(b)
    $slots[b] = e
    $slots[a] = nil
    $bg[b] = $bg.delete(a) if $bg.key?(a)
  end

  def self.take_id(slot)
    e = $slots[slot] or return
    e.id ||= e.obj.object_id
  end

  # Identity of inner objects (old children, young children) is checked too.
  def self.ident(slot, seed)
    e = get(slot, %i[ary wide tree misc frozen]) or return
    o = e.obj
    # :misc and :frozen entries may hold objects that are no collection (a DTList): skip them.
    return unless o.respond_to?(:empty?) && o.respond_to?(:size) && o.respond_to?(:[])
    return if o.empty?
    r = rng(seed)
    x = o[r.rand(o.size)]
    return if x.nil? || x == true || x == false || x.is_a?(Integer) || x.is_a?(Symbol) || x.is_a?(Float)
    e.idents << [x, x.object_id, B.dig(x)]
    e.idents.shift if e.idents.size > 4
  end

  def self.freeze(slot)
    e = get(slot, MUTABLE) or return
    return if e.fintag
    e.obj.freeze
    e.kind = :frozen
  end

  # ---------------- GC control ----------------

  def self.gc(full, sweep, mark)
    kw = {}
    kw[:full_mark] = full unless full.nil?
    kw[:immediate_sweep] = sweep unless sweep.nil?
    kw[:immediate_mark] = mark unless mark.nil?
    GC.start(**kw)
  end

  def self.age(n = 4) = n.times { GC.start }

  def self.minor2
    GC.start(full_mark: false, immediate_sweep: true)
    GC.start(full_mark: false, immediate_sweep: true)
  end

  # ---------------- compaction ----------------

  # kind: 0 GC.compact; 1 GC.verify_compaction_references(toward: :empty); 2 the same with
  # expand_heap: true; 3 with double_heap: true; 4 verify_compaction_references without
  # arguments. A GC that finds a broken reference raises (Mosaic) or stops ([BUG], default).
  # What moved where differs between GCs (the default GC does not move every object Mosaic
  # moves, and the other way round): the statistics these return are never printed.
  def self.compact(kind)
    case kind
    when 0 then GC.compact
    when 1 then GC.verify_compaction_references(toward: :empty)
    when 2 then GC.verify_compaction_references(toward: :empty, expand_heap: true)
    when 3 then GC.verify_compaction_references(toward: :empty, double_heap: true)
    else GC.verify_compaction_references
    end
    nil
  end

  # GC.auto_compact on or off (it stays so for the following steps), then n major GCs, eager
  # and lazy: with it on, each of them compacts.
  def self.auto_compact(on, n)
    GC.auto_compact = on
    n.times { |i| i.even? ? GC.start : GC.start(full_mark: true, immediate_sweep: false) }
    out "auto_compact: #{GC.auto_compact.inspect}"
  end

  # A compaction inside a heap walk: the walk goes on and yields only intact objects. How many
  # it yields is the GC's business (Mosaic does not move objects while a walk is live; the
  # default GC moves them, so its walk can miss or revisit one): never printed.
  def self.walk_compact(kind)
    n = bad = 0
    ObjectSpace.each_object(DTTagged) do |o|
      compact(kind) if n == 0
      n += 1
      bad += 1 unless DTTagged === o && o.t.is_a?(Integer)
    end
    err "walk_compact: #{bad} objects yielded by a walk that compacted were not intact" if bad > 0
    out "walk_compact: ok"
  end

  # The same inside an external walk (an Enumerator suspended in ObjectSpace.each_object): the
  # compaction happens between two steps of the walk.
  def self.walk_compact_ext(kind)
    e = ObjectSpace.each_object(DTTagged)
    bad = 0
    begin
      o = e.next
      compact(kind)
      4.times do
        bad += 1 unless DTTagged === o && o.t.is_a?(Integer)
        o = e.next
      end
      loop { e.next }   # end the walk (a suspended one keeps Mosaic from compacting)
    rescue StopIteration
    end
    e = o = nil
    err "walk_compact_ext: #{bad} objects yielded by a walk suspended over a compaction were not intact" if bad > 0
    out "walk_compact_ext: ok"
  end

  # Process.warmup: a full, compacting GC that promotes everything and gives empty pages back.
  def self.warmup
    out "warmup: #{Process.warmup.inspect}"
  end

  # Allocation tracing (ext/objspace keeps a table keyed by object address, re-keyed by its
  # dcompact when an object moves): every traced object keeps its file and line across moves.
  # Not once a Ractor has run: CRuby 3.4.5's NEWOBJ hook then misses allocations of the main
  # Ractor at times (its event flags are global, its hooks per Ractor; gc.c, not the GC, fires
  # the hook): seen under the default GC (seed 2083 --auto-compact, 2 runs in 12).
  def self.alloc_trace(n, seed, kind)
    return compact(kind) if $multi_ractor
    r = rng(seed)
    line = nil
    ObjectSpace.trace_object_allocations do
      objs = Array.new(n) { |i| line = __LINE__; i.even? ? DTVal.new(tag, r.rand(4)) : "s#{i}" * r.rand(100) }
      compact(kind)
      bad = objs.count { |o| ObjectSpace.allocation_sourceline(o) != line || ObjectSpace.allocation_sourcefile(o) != __FILE__ }
      err "alloc_trace: #{bad} of #{n} objects lost their allocation site across a compaction" if bad > 0
      out "alloc_trace: #{n} #{B.dig(objs)}"
    end
  end

  # Finalizers that compact (outside the GC, in the finalizer job): n objects dropped at once.
  def self.fin_compact(n, seed)
    r = rng(seed)
    n.times do
      o = DTFin.new(0, r.rand(30))
      define_fin(o, false)
      ObjectSpace.define_finalizer(o, compact_proc)   # a second one, not counted
    end
    Array.new(2000) { |i| "fc#{i}" }
    nil
  end

  def self.compact_proc = proc { GC.compact unless $exiting || $walking }   # (made here: it captures no object)

  # A heap walk whose counts are checked: no finalizer compacts during it (the default GC moves
  # objects under a walk, which can then miss one; walk_compact is where that is allowed).
  def self.walking
    was = $walking
    $walking = true
    yield
  ensure
    $walking = was
  end

  # A "held" bundle: objects that must keep their identity through moves, held in every way a
  # program can hold an object: object ids taken before and after the move, _id2ref, Object#hash,
  # Hash keys (eql?/hash) and compare_by_identity keys, WeakMap and WeakKeyMap entries,
  # finalizers, Struct/Data/Set/Queue members, another Thread's locals (Thread#[] and
  # thread_variable) and stack, a Fiber's stack, a suspended Enumerator, generic ivars on
  # Strings/Arrays/Hashes/Structs/Regexps/Queues/Procs/Times, a captured local, a singleton
  # method, the main thread's fiber-locals, a Ractor-shareable frozen structure, shared and
  # embedded strings and arrays, an interned string (String#-@) and a dynamic Symbol. check_held
  # (at every check) verifies every one of them.
  Held = Struct.new(:objs, :dig, :ids, :hashes, :h, :ih, :ikeys, :wm, :wkm, :st, :da, :set, :q,
                    :thr, :tq, :rq, :tmine, :fib, :fmine, :en, :en_i, :gen, :shr, :shr_dig, :strs,
                    :str_digs, :fs, :fs_name, :sym, :sym_name, :sym_id, :lam, :tlkey, :fin_tags)

  def self.held(slot, n, seed, kind, fin)
    r = rng(seed)
    b = Held.new
    objs = Array.new(n) do |i|
      t = tag
      case i % 6
      when 0 then DTHeld.new(t, B.str(r, B::STR_LENS.sample(random: r)), i)
      when 1 then DTKey.new(t, r.rand(8))
      when 2 then DTStr.make(t)
      when 3 then DTHeld.new(t, B.ary(r, r.rand(6)), DTVal.new(tag, 1))
      when 4 then DTVal.new(t, r.rand(4))
      else DTHeld.new(t, nil, B.hash(r, r.rand(4)))
      end
    end
    b.objs = objs
    b.dig = B.dig(objs)
    b.ids = {}
    objs.each_with_index { |o, i| b.ids[i] = o.object_id if i.even? }   # the odd ones after the move
    b.hashes = objs.map(&:hash)
    b.h = {}
    objs.each_with_index { |o, i| b.h[o] = i }
    b.ih = {}.compare_by_identity
    b.ikeys = Array.new([n, 8].min) { |i| +"ik#{i % 3}" }                # equal strings, distinct keys
    b.ikeys.each_with_index { |k, i| b.ih[k] = i }
    # compare_by_identity pins its keys (both GCs): only every third object, so the rest can move.
    objs.each_with_index { |o, i| b.ih[o] = -i - 1 if i % 3 == 0 }
    b.wm = ObjectSpace::WeakMap.new
    b.wkm = ObjectSpace::WeakKeyMap.new
    objs.each_with_index { |o, i| b.wm[o] = objs[(i + 1) % n]; b.wkm[o] = i }
    b.st = DTPoint.new(objs[0], objs[n / 2], objs[-1])
    b.da = DTData.new(a: objs[1 % n], b: [objs[2 % n]])
    b.set = Set.new(objs)
    b.q = Thread::Queue.new
    objs.first(10).each { |o| b.q << o }
    b.tq = Thread::Queue.new
    b.rq = Thread::Queue.new
    b.tmine = objs.sample([n, 5].min, random: r)
    b.thr = Thread.new(b.tmine.dup, b.tq, b.rq, seed) do |m, tq, rq, sd|
      Thread.current[:dtl] = m[0]
      Thread.current.thread_variable_set(:dtv, m[-1])
      own = B.build(Random.new(sd), 10)
      d = B.dig(own)
      ids = m.map(&:object_id)
      while tq.pop != :stop
        rq << [m.map(&:object_id) == ids && B.dig(own) == d && Thread.current[:dtl].equal?(m[0]), m]
      end
    end
    b.fmine = objs.sample([n, 5].min, random: r)
    b.fib = Fiber.new do |m|
      own = B.build(Random.new(seed + 1), 10)
      d = B.dig(own)
      ids = m.map(&:object_id)
      loop { Fiber.yield(m.map(&:object_id) == ids && B.dig(own) == d, m) }
    end
    b.fib.resume(b.fmine.dup)
    b.en = objs.each
    b.en.next
    b.en_i = 1
    gs = [B.str(r, 30), B.ary(r, 3), {}, DTPoint.new(1, 2, 3), Regexp.new("dt#{seed % 100}"), Thread::Queue.new,
          proc { seed }, Time.at(seed)]
    b.gen = gs.each_with_index.map do |g, i|
      v = objs[i % n]
      g.instance_variable_set(:@dtg, v)
      g.instance_variable_set(:@dtg2, "g#{i}")
      [g, v]
    end
    b.shr = Ractor.make_shareable(B.build(Random.new(seed + 2), 5 + n % 20))
    b.shr_dig = B.dig(b.shr)
    long = B.str(r, 100 + r.rand(500))
    la = B.ary(r, 30 + r.rand(50))
    b.strs = [long, long[5..], long.dup, long.dup.freeze, B.str(r, 7), long[0, 10], la, la[3..], la.dup,
              la.first(2), "#{long[0, 3]}x"]
    b.str_digs = b.strs.map { |x| B.dig(x) }
    b.fs_name = "dtfs-#{seed}"
    b.fs = -(b.fs_name.dup)
    b.sym_name = "dtsym_#{seed}"
    b.sym = b.sym_name.to_sym
    b.sym_id = b.sym.object_id
    cap = objs[0]
    b.lam = -> { cap }
    objs[0].define_singleton_method(:dtself) { self }
    b.tlkey = :"dth#{tag}"
    Thread.current[b.tlkey] = objs[-1]
    b.fin_tags = fin ? objs.each_index.select { |i| i % 5 == 2 }.map { |i| define_fin(objs[i], true) } : []
    put(slot, :held, b)
    $slots[slot].dig = b.dig
    compact(kind) if kind
    objs.each_with_index { |o, i| b.ids[i] = o.object_id if i.odd? }
    bad = check_held(slot, b)
    out "held slot #{slot}: n=#{n} digest=#{b.dig} ok=#{bad == 0}"
    objs = long = la = gs = nil   # (cap stays: the lambda reads it)
  end

  def self.release_held(b)
    b.fin_tags.each { |t| $fin_live.delete(t) }
    if b.thr.alive?
      b.tq << :stop
      b.thr.join
    end
    Thread.current[b.tlkey] = nil
  end

  def self.check_held(slot, b)
    bad = []
    objs = b.objs
    n = objs.size
    bad << "contents changed" if B.dig(objs) != b.dig
    b.ids.each do |i, id|
      o = objs[i]
      bad << "object_id changed" if o.object_id != id
      x = begin
        ObjectSpace._id2ref(id)
      rescue RangeError
        $multi_ractor ? o : nil
      end
      bad << "_id2ref gives another object" unless x.equal?(o)
    end
    bad << "Object#hash changed" if objs.map(&:hash) != b.hashes
    objs.each_with_index do |o, i|
      bad << "Hash lookup" unless b.h[o] == i
      bad << "compare_by_identity lookup" unless b.ih[o] == (i % 3 == 0 ? -i - 1 : nil)
      bad << "WeakMap lookup" unless b.wm[o].equal?(objs[(i + 1) % n]) && b.wm.key?(o)
      bad << "WeakKeyMap lookup" unless b.wkm[o] == i && b.wkm.getkey(o).equal?(o)
      bad << "Set#include?" unless b.set.include?(o)
    end
    b.ikeys.each_with_index { |k, i| bad << "compare_by_identity lookup (strings)" unless b.ih[k] == i }
    bad << "compare_by_identity found a copy" if b.ikeys.any? { |k| b.ih.key?(k.dup) }
    bad << "sizes" unless b.h.size == n && b.ih.size == (n + 2) / 3 + b.ikeys.size && b.set.size == n
    bad << "Struct members" unless b.st.x.equal?(objs[0]) && b.st.y.equal?(objs[n / 2]) && b.st.z.equal?(objs[-1])
    bad << "Data members" unless b.da.a.equal?(objs[1 % n]) && b.da.b[0].equal?(objs[2 % n])
    got = Array.new(b.q.size) { b.q.pop }
    got.each { |x| b.q << x }
    bad << "Queue contents" unless got.size == [n, 10].min && got.each_with_index.all? { |x, i| x.equal?(objs[i]) }
    if b.thr.alive?
      b.tq << :check
      ok, m = b.rq.pop
      bad << "another thread's locals" unless ok && m.each_with_index.all? { |x, i| x.equal?(b.tmine[i]) }
      bad << "Thread#[] / thread_variable_get" unless b.thr[:dtl].equal?(b.tmine[0]) && b.thr.thread_variable_get(:dtv).equal?(b.tmine[-1])
    elsif !$errs   # a forked child has no other thread
      bad << "its thread died"
    end
    if b.fib.alive?
      ok, m = b.fib.resume
      bad << "a fiber's locals" unless ok && m.each_with_index.all? { |x, i| x.equal?(b.fmine[i]) }
    else
      bad << "its fiber died"
    end
    if b.en_i < n
      bad << "Enumerator#next" unless b.en.next.equal?(objs[b.en_i])
      b.en_i += 1
    end
    b.gen.each_with_index do |(g, v), i|
      bad << "generic ivar of a #{g.class}" unless g.instance_variable_get(:@dtg).equal?(v) && g.instance_variable_get(:@dtg2) == "g#{i}"
    end
    bad << "shareable structure" unless Ractor.shareable?(b.shr) && B.dig(b.shr) == b.shr_dig
    bad << "shared/embedded strings and arrays" unless b.strs.map { |x| B.dig(x) } == b.str_digs
    bad << "String#-@ gives another string" unless (-(b.fs_name.dup)).equal?(b.fs) && b.fs == b.fs_name
    bad << "dynamic Symbol" unless b.sym_name.to_sym.equal?(b.sym) && b.sym.object_id == b.sym_id && b.sym.name == b.sym_name
    bad << "captured local" unless b.lam.call.equal?(objs[0])
    bad << "singleton method" unless objs[0].dtself.equal?(objs[0])
    bad << "fiber-local of the main thread" unless Thread.current[b.tlkey].equal?(objs[-1])
    unless $multi_ractor   # then each_object yields shareable objects only
      found = {}.compare_by_identity
      walking { ObjectSpace.each_object(DTHeld) { |o| found[o] = true } }
      bad << "each_object(DTHeld) missed held objects" unless objs.all? { |o| !(DTHeld === o) || found[o] }
    end
    bad.uniq.first(3).each { |x| err "held slot #{slot}: #{x}" }
    bad.empty? ? 0 : 1
  end

  def self.nstr(k) = "n#{k}-#{'y' * (k % 50)}"
  def self.make_cell(v) = [-> { v }, ->(x) { v = x }]

  # Short-lived allocation (minor GCs happen on their own), a few survivors kept in an old ring.
  def self.churn(n, kind)
    k = 0
    n.times do |i|
      case kind
      when 0 then x = "c#{i}"
      when 1 then x = Array.new(i % 20)
      when 2 then x = DTVal.new(-1, i % 10)
      when 3 then x = { a: i, b: "h#{i}" }
      when 4 then x = "s" * (i % 700)
      else
        # Every size class, so freed slots of any class get reused at once.
        x = case i % 6
            when 0 then DTVal.new(-1, i % 70)
            when 1 then Array.new(i % 80)
            when 2 then "m" * (i % 640)
            when 3 then DTKey.new(-1, i % 30)
            when 4 then DTStr.make(-1)
            else Object.new
            end
      end
      if i % 97 == 0
        j = ($nursery_i += 1) % $nursery.size
        k = $nursery_i
        $nursery[j] = nstr(k)
        $nursery_k[j] = k
      end
      if i % 89 == 0
        j = i / 89 % $cells.size
        k = ($nursery_i += 1)
        if $cells[j] then $cells[j][1].call(nstr(k)) else $cells[j] = make_cell(nstr(k)) end
        $cells_k[j] = k
      end
    end
    x = nil
  end

  def self.stress(mode, n, seed)
    GC.stress = mode   # a GC at every allocation: keep the work tiny
    begin
      a = Array.new(n) { |i| [i, "s#{i}-#{seed % 1000}"] }
      o = B.obj(rng(seed + 1), n % 8)
    ensure
      GC.stress = false
    end
    out "stress: #{B.dig(a)} #{B.dig(o)}"
  end

  def self.disabled(n, seed, start)
    was = GC.disable
    a = B.wide(rng(seed), n)
    start == :compact ? GC.compact : (GC.start if start)   # both run while GC is disabled
    now = GC.enable
    out "disabled: #{was} #{now} #{B.dig(a)}"
  end

  # A deep chain of C frames (Array#each -> block -> ...) overwrites stale words on the machine
  # stack, so conservative scanning keeps less dead garbage alive.
  def self.scrub(n = 120)
    return 0 if n == 0
    a = b = c = nil
    [n].each { |m| a = scrub(m - 1) }
    a.to_i + (b || 0) + (c || 0)
  end

  # ---------------- weak maps ----------------

  def self.wm_new(slot, keyed)
    m = keyed ? ObjectSpace::WeakKeyMap.new : ObjectSpace::WeakMap.new
    put(slot, keyed ? :wkm : :wm, m)
    $slots[slot].idents = WModel.new({}.compare_by_identity, {}, 0, [], [], [])
  end

  def self.pool(n, seed)
    r = rng(seed)
    n.times { |i| o = fresh(r); $pool << o; $pool_set[o] = true }
  end

  def self.fresh(r, key_str = false)
    t = tag
    return DTStr.make(t) if key_str
    case r.rand(4)
    when 0 then DTKey.new(t, r.rand(4) == 0 ? r.rand(60) : r.rand(3))
    when 1 then DTVal.new(t, r.rand(10))
    when 2 then DTStr.make(t)
    else DTKey.new(t, 10 + r.rand(20))
    end
  end

  # The tag a map's value carries: its own for tagged objects, itself for Integers.
  def self.vt(v) = v.is_a?(Integer) ? v : v.t

  def self.pick(r, mode, model, key_str = false)
    return tag if mode == :int
    return fresh(r, key_str) if mode != :old || $pool.empty?
    $pool[r.rand($pool.size)]
  end

  # kmode/vmode: :old (pool, aged), :young (fresh, held by the model), :eph (fresh, unreachable),
  # and for values :int (an Integer: the entry lives as long as its key).
  def self.wm_put(slot, n, seed, kmode, vmode)
    e = get(slot, %i[wm wkm]) or return
    m = e.obj
    md = e.idents
    r = rng(seed)
    keyed = e.kind == :wkm
    vmode = :young if keyed && vmode == :eph   # a WeakKeyMap holds its values strongly
    kmode = :young if kmode == :int
    n.times do
      k = pick(r, kmode, md, keyed && kmode == :eph)
      v = pick(r, vmode, md)
      m[k] = v
      md.last[k.t] = vt(v)
      if kmode == :eph || vmode == :eph
        md.held.delete(k)
        md.eph_total += 1
        md.eph_keys << k.t if keyed
        md.eph_keys.shift if md.eph_keys.size > 300
        if kmode != :eph
          md.eph_held_keys << k
          md.eph_held_keys.shift if md.eph_held_keys.size > 300
        elsif vmode != :eph && !v.is_a?(Integer) && !$pool_set.key?(v)
          md.keep << v
        end
      else
        md.held[k] = v
      end
    end
    k = v = nil
  end

  def self.wm_overwrite(slot, n, seed, vmode)
    e = get(slot, %i[wm wkm]) or return
    m = e.obj
    md = e.idents
    r = rng(seed)
    vmode = :young if e.kind == :wkm && vmode == :eph
    md.held.keys.sample(n, random: r).each do |k|
      v = pick(r, vmode, md)
      m[k] = v
      md.last[k.t] = vt(v)
      if vmode == :eph
        md.held.delete(k)
        md.eph_total += 1
        md.eph_held_keys << k
      else
        md.held[k] = v
      end
    end
    nil
  end

  def self.wm_del(slot, n, seed)
    e = get(slot, %i[wm wkm]) or return
    md = e.idents
    md.held.keys.sample(n, random: rng(seed)).each do |k|
      v = md.held.delete(k)
      got = e.obj.delete(k)
      md.last.delete(k.t)
      err "#{e.kind} slot #{slot}: delete returned the wrong value" unless got.equal?(v)
    end
    nil
  end

  # Stop holding some entries whose key is fresh: the key becomes unreachable.
  def self.wm_unhold(slot, n, seed)
    e = get(slot, %i[wm wkm]) or return
    md = e.idents
    ks = md.held.keys.reject { |k| $pool_set.key?(k) }.sample(n, random: rng(seed))
    ks.each do |k|
      md.held.delete(k)
      md.eph_total += 1
      md.eph_keys << k.t if e.kind == :wkm && k.is_a?(DTStr)
    end
    ks = nil
  end

  # Stop holding some values of a WeakMap, keep their keys: the values become unreachable and
  # the entries must read as nil (or, until collected, the old value) from then on.
  def self.wm_unhold_val(slot, n, seed)
    e = get(slot, %i[wm]) or return
    md = e.idents
    ks = md.held.keys.reject { |k| $pool_set.key?(md.held[k]) || md.held[k].is_a?(Integer) }.sample(n, random: rng(seed))
    ks.each do |k|
      md.held.delete(k)
      md.eph_total += 1
      md.eph_held_keys << k
      md.eph_held_keys.shift if md.eph_held_keys.size > 300
    end
    ks = nil
  end

  def self.wkm_clear(slot)
    e = get(slot, %i[wkm]) or return
    e.obj.clear
    e.idents = WModel.new({}.compare_by_identity, {}, 0, [], [], [])
  end

  def self.tagged_ok(x, want_tag)
    return x == want_tag if x.is_a?(Integer)
    !x.nil? && DTTagged === x && x.t == want_tag
  end

  def self.check_weak(slot, e, gone)
    m = e.obj
    md = e.idents
    bad = 0
    md.held.each do |k, v|
      x = m[k]
      unless x.equal?(v) && m.key?(k)
        bad += 1
        err "#{e.kind} slot #{slot}: held key #{k.t} maps to #{describe(x)}, want #{vt(v)}" if bad <= 3
      end
      if e.kind == :wkm && !m.getkey(k).equal?(k)
        bad += 1
        err "wkm slot #{slot}: getkey of held key #{k.t} gives #{describe(m.getkey(k))}" if bad <= 3
      end
    end
    md.eph_held_keys.each do |k|
      next if md.held.key?(k)
      x = m[k]
      want = md.last[k.t]
      next if x.nil?
      next if want && tagged_ok(x, want)
      bad += 1
      err "#{e.kind} slot #{slot}: key #{k.t} (value unreachable) maps to #{describe(x)}, want nil or #{want.inspect}" if bad <= 3
    end
    if e.kind == :wm
      eph_left = 0
      m.each_pair do |k, v|
        unless DTTagged === k && (v.is_a?(Integer) || DTTagged === v) && md.last[k.t] == vt(v)
          bad += 1
          err "wm slot #{slot}: entry #{describe(k)} => #{describe(v)} was never stored" if bad <= 3
          next
        end
        eph_left += 1 unless md.held.key?(k)
      end
      if gone
        ok = eph_left <= md.eph_total / 10 + 8
        out "  wm slot #{slot}: held=#{md.held.size} dead-entries-gone=#{ok}"
        err "wm slot #{slot}: #{eph_left} of #{md.eph_total} dead entries remain after a full GC" unless ok
      end
    else
      md.eph_keys.each do |t|
        probe = B.kstr(t)
        x = m[probe]
        if !x.nil? && !tagged_ok(x, md.last[t])
          bad += 1
          err "wkm slot #{slot}: dead key #{t} maps to #{describe(x)}" if bad <= 3
        end
        g = m.getkey(probe)
        if !g.nil? && !(DTStr === g && g.t == t && g == probe)
          bad += 1
          err "wkm slot #{slot}: getkey of dead key #{t} gives #{describe(g)}" if bad <= 3
        end
      end
      if gone
        size = m.inspect[/size=(\d+)/, 1].to_i
        eph_left = size - md.held.size
        ok = eph_left >= 0 && eph_left <= md.eph_total / 10 + 8
        out "  wkm slot #{slot}: held=#{md.held.size} dead-keys-gone=#{ok}"
        err "wkm slot #{slot}: size #{size}, #{md.held.size} held, #{md.eph_total} dead keys" unless ok
      end
    end
    bad
  end

  def self.describe(x)
    return "nil" if x.nil?
    return "Integer" if x.is_a?(Integer)
    return "#{x.class}(t=#{x.t})" if DTTagged === x
    x.class.to_s
  rescue Exception => ex
    "<#{ex.class}>"
  end

  # ---------------- finalizers ----------------

  def self.fin_proc(t) = proc { |id| S.fin_ran(t, id) }

  def self.fin_ran(t, id)
    $fin_ran[t] += 1
    $fin_bad << "finalizer #{t} ran while its object was held" if $fin_live[t]
    $fin_bad << "finalizer #{t} ran twice" if $fin_ran[t] > 1
    $fin_bad << "finalizer #{t} ran after undefine_finalizer" if $fin_undef[t]
    $fin_bad << "finalizer #{t} got the wrong object id" if $fin_ids[t] != id
    if $exiting
      if $fin_done
        puts "ERR finalizer #{t} ran after all had run"
      elsif $fin_ran.size >= $fin_defined
        $fin_done = true
        $fin_bad.uniq.first(5).each { |b| puts "ERR #{b}" }
        puts "finalizers: #{$fin_defined} defined, #{$fin_ran.size} ran, #{$fin_bad.size} problems"
      end
    end
  end

  def self.define_fin(o, held)
    t = tag
    $fin_ids[t] = o.object_id
    $fin_live[t] = true if held
    $fin_defined += 1
    ObjectSpace.define_finalizer(o, fin_proc(t))
    t
  end

  # n objects with finalizers, held in slot (or dropped at once when slot is nil).
  def self.fin(slot, n, seed)
    r = rng(seed)
    objs = Array.new(n) { DTFin.new(0, r.rand(30)) }
    tags = objs.map { |o| define_fin(o, !slot.nil?) }
    if slot
      put(slot, :fin, objs)
      $slots[slot].idents = tags
    end
    objs = nil
  end

  def self.fin_undef(slot, n)
    e = get(slot, %i[fin]) or return
    e.obj.first(n).each_with_index do |o, i|
      t = e.idents[i]
      next if $fin_undef[t]
      ObjectSpace.undefine_finalizer(o)
      $fin_undef[t] = true
      $fin_defined -= 1
    end
  end

  def self.fin_shrink(slot, n)
    e = get(slot, %i[fin]) or return
    n.times do
      break if e.obj.empty?
      t = e.idents.pop
      $fin_live.delete(t)
      e.obj.pop
    end
  end

  def self.fin_slot(slot)
    e = get(slot, %i[str ary hash obj list wide]) or return
    return if e.fintag || e.obj.frozen?
    e.fintag = define_fin(e.obj, true)
  end

  # ---------------- object ids, each_object ----------------

  def self.counted(n, keep)
    keep.times { |i| $counted << DTCounted.new(i) }
    (n - keep).times { |i| DTCounted.new(i) }
    $counted_dropped += n - keep
    nil
  end

  def self.counted_drop(n)
    n = [n, $counted.size].min
    n.times { $counted.pop }   # pop(n) would share the buffer, which keeps them all marked
    $counted_dropped += n
  end

  # ---------------- bulk writes, incremental marking ----------------

  # A bundle of containers for bulk writes (B.bulk_set), made old by `age` GCs (3 make an
  # object old, under either GC).
  def self.bulk_new(slot, seed, age)
    put(slot, :bulk, B.bulk_set(rng(seed)))
    age.times { GC.start(full_mark: false) }   # minor GCs age young objects too
    $slots[slot]
  end

  # n bulk writes of k young objects each into slot's bundle (made and aged first if the slot
  # holds none).
  def self.bulk(slot, n, k, seed)
    e = get(slot, %i[bulk]) || bulk_new(slot, seed, 3)
    r = rng(seed)
    _c1, _c2, _c3, _c4, _c5, _c6, _c7, _c8, _c9, _c10, _c11 = *e.obj[1..11]   # see inc_mark
    n.times { B.bulk_op(e.obj, r, k) }
    snap(e)
    out "bulk slot #{slot}: #{e.dig}"
  end

  # Bulk writes into whatever Array or Hash the slot holds (old if steps aged it): concat,
  # []= with a range, insert, replace then a write, Hash#replace, #update, #rehash.
  def self.bulk_into(slot, n, k, seed)
    e = get(slot, %i[ary wide hash]) or return
    o = e.obj
    return if o.frozen?
    r = rng(seed)
    c = [seed % 100_000 * 1000]
    cap = [o.size, 300].max
    n.times do
      young = Array.new(k) { B.yng(r, c) }
      if o.is_a?(Hash)
        case r.rand(3)
        when 0 then o.update(young.to_h { |x| [B.bstr(c), x] })
        when 1 then o.replace(o.to_a.last(cap / 2).to_h.merge!(young.to_h { |x| [B.bstr(c), x] }))
        else
          o[B.bstr(c)] = young
          o.rehash
        end
        o.shift while o.size > cap
      else
        case r.rand(4)
        when 0 then o.concat(young)
        when 1 then o[r.rand(o.size + 1)..] = young
        when 2 then o.insert(r.rand(o.size + 1), *young)
        else
          o.replace(o.last(cap / 2) + young)
          o << B.bstr(c)
        end
        o.pop(o.size - cap) if o.size > cap
      end
    end
    snap(e)
  end

  # An incremental major (GC.start(immediate_mark: false): Mosaic marks it in steps at cache
  # refills, re-tracing an already marked container written in bulk) with the mutator at work
  # while it marks: n bulk writes of k young objects into slot's old bundle, young objects
  # stored into other slots' structures now and then, garbage, churn of `churn_n` objects;
  # then the mark ends (GC.start), freed slots get reused, and the bundle must read back as
  # written. Whether the GC still marks at some point is its business: never printed.
  def self.inc_mark(slot, n, k, seed, churn_n)
    e = get(slot, %i[bulk]) || bulk_new(slot, seed, 3)
    s = e.obj
    r = rng(seed)
    # Locals (roots): the containers are marked when a mark starts, before the writes.
    _c1, _c2, _c3, _c4, _c5, _c6, _c7, _c8, _c9, _c10, _c11 = *s[1..11]
    n.times do |i|
      GC.start(full_mark: true, immediate_mark: false) if i % 100 == 0   # finishes one going on
      B.bulk_op(s, r, k)
      $reach[:bulk_in_mark] += 1 if GC.latest_gc_info(:state) == :marking
      Array.new(6) { |j| "g#{i}-#{j}" }
      if i % 64 == 63 && !$slots.empty?   # a young object into another slot's structure (small kinds:
        j = r.rand($slots.size)            # mutate digests the whole structure again)
        mutate(j, 1, r.rand(1 << 30)) if get(j, %i[str ary hash obj misc])
      end
    end
    churn(churn_n, 5) if churn_n > 0
    snap(e)
    d = e.dig
    GC.start
    churn(3000, 5)
    err "inc_mark slot #{slot}: the bundle changed after its mark ended" unless B.dig(s) == d
    out "inc_mark slot #{slot}: #{d}"
  end

  # ---------------- fibers, threads, Ractors, fork ----------------

  def self.fiber_new(slot, size, seed)
    f = Fiber.new do |cmd|
      mine = B.build(Random.new(seed), size)   # only this fiber's stack holds it
      more = B.str(Random.new(seed + 1), 300)
      d = B.dig(mine) ^ B.dig(more)
      loop do
        cmd = Fiber.yield(d)
        now = B.dig(mine) ^ B.dig(more)
        break [now == d, now] if cmd == :stop
        Array.new(cmd) { |i| "garbage#{i}" }
        more = B.str(Random.new(cmd), 100 + cmd % 700)
        mine = [mine, B.ary(Random.new(cmd), cmd % 40)] if cmd.odd?
        d = B.dig(mine) ^ B.dig(more)
      end
    end
    put(slot, :fiber, f)
    $slots[slot].dig = f.resume(nil)
  end

  def self.fiber_poke(slot, n)
    e = get(slot, %i[fiber]) or return
    e.dig = e.obj.resume(n)
  end

  def self.fiber_end(slot)
    e = get(slot, %i[fiber]) or return
    ok, d = e.obj.resume(:stop)
    err "fiber slot #{slot}: its locals changed" unless ok
    out "fiber: #{d}"
    release(slot)
  end

  def self.threads(slot, n, size, seed)
    ts = Array.new(n) do |i|
      Thread.new(seed + i) do |sd|
        o = B.build(Random.new(sd), size)
        GC.start(full_mark: sd.odd?) if sd % 3 == 0
        Array.new(size * 10) { |j| "t#{j}" }
        [B.dig(o), o]
      end
    end
    res = ts.map(&:value)
    res.each_with_index { |(d, o), i| err "thread #{i}: its structure changed" unless B.dig(o) == d }
    out "threads: #{res.map(&:first).join(' ')}"
    put(slot, :ary, res.map(&:last)) if slot
  end

  # Threads that allocate and write into shared structures: each thread writes in bulk into
  # its own old bundle and appends to its own list of a shared Hash (keys made before the
  # threads start; under a Mutex) and sends results through a Queue; one thread starts
  # incremental majors. What is printed does not depend on the interleaving: each bundle's
  # digest, the Queue's items sorted, the shared Hash.
  def self.thread_mix(slot, nt, iters, seed)
    m = Mutex.new
    q = Thread::Queue.new
    shared = {}
    nt.times { |i| shared[i] = [] }
    olds = Array.new(nt) { |i| B.bulk_set(Random.new(seed + i), [i * 10_000_000]) }
    3.times { GC.start(full_mark: false) }
    ts = Array.new(nt) do |i|
      Thread.new(i) do |ti|
        r = Random.new(seed + 100 + ti)
        s = olds[ti]
        _c1, _c2, _c3, _c4, _c5, _c6, _c7, _c8, _c9, _c10, _c11 = *s[1..11]   # see inc_mark
        iters.times do |j|
          B.bulk_op(s, r, 17 + r.rand(8))
          x = B.build(r, 4)
          m.synchronize do
            shared[ti] << x
            shared[ti].shift if shared[ti].size > 16
          end
          q << [ti, j, B.dig(x)]
          Thread.pass if j % 3 == 0
          GC.start(full_mark: true, immediate_mark: false) if ti == 0 && j % 40 == 20
        end
        B.dig(olds[ti])
      end
    end
    res = ts.map(&:value)
    got = []
    got << q.pop until q.empty?
    got.sort!
    bad = res.each_index.count { |i| B.dig(olds[i]) != res[i] }
    err "thread_mix: #{bad} bundles changed after their thread ended" if bad > 0
    err "thread_mix: #{got.size} results, want #{nt * iters}" if got.size != nt * iters
    out "thread_mix: #{res.join(' ')} #{B.dig(got)} #{B.dig(shared)}"
    put(slot, :ary, [shared, olds]) if slot
  end

  # Fibers switched many times, each holding young structures only on its own stack and
  # writing in bulk into a shared old bundle between switches; some switches start an
  # incremental major. At every switch a fiber checks that what it holds is unchanged.
  def self.fiber_mix(slot, nf, switches, seed)
    old = B.bulk_set(rng(seed))
    _c1, _c2, _c3, _c4, _c5, _c6, _c7, _c8, _c9, _c10, _c11 = *old[1..11]   # see inc_mark
    3.times { GC.start(full_mark: false) }
    fs = Array.new(nf) do |i|
      Fiber.new do |n|
        r = Random.new(seed + 1 + i)
        mine = [B.build(r, 6), B.str(r, 100)]
        d = B.dig(mine)
        bad = 0
        loop do
          n = Fiber.yield(d)
          break if n == :stop
          bad += 1 if B.dig(mine) != d
          B.bulk_op(old, r, 17 + n % 8)
          mine = [mine[1], B.yng(r, old[0]), Array.new(n % 30) { |j| "f#{i}-#{j}" }]
          d = B.dig(mine)
        end
        [bad, B.dig(mine) == d]
      end
    end
    ds = fs.map { |f| f.resume(nil) }
    r = rng(seed + 1)
    switches.times do |j|
      i = r.rand(nf)
      ds[i] = fs[i].resume(j)
      GC.start(full_mark: true, immediate_mark: false) if j % 50 == 25
    end
    res = fs.map { |f| f.resume(:stop) }
    bad = res.sum { |b, ok| b + (ok ? 0 : 1) }
    err "fiber_mix: #{bad} times a fiber's locals changed" if bad > 0
    out "fiber_mix: #{B.dig(ds)} #{B.dig(old)}"
    put(slot, :bulk, old) if slot
  end

  # GC.stress turned on inside a scheduled fiber of another thread, as in CRuby's
  # test_iseq_compile_under_gc_stress_bug_21180: the first fiber turns it on and blocks, in C,
  # reading /dev/null through the scheduler (compile_file); the others build structures under
  # stress and wait on pipes; the thread's block ends, and closing its scheduler resumes them
  # all, while the main thread waits in Thread#value. Each fiber checks its structure.
  def self.sched_stress(n, size, mode, seed)
    res = Thread.new do
      Fiber.set_scheduler(DTScheduler.new)
      pipes = Array.new(n) { IO.pipe }
      got = Array.new(n)
      n.times do |i|
        Fiber.schedule do
          r = Random.new(seed + i)
          o = B.build(r, size)
          d = B.dig(o)
          begin
            if i == 0
              GC.stress = mode
              RubyVM::InstructionSequence.compile_file(File::NULL)
            end
            data = pipes[i][0].read
          ensure
            GC.stress = false if i == 0
            pipes[i][0].close
          end
          got[i] = [data, B.dig(o) == d, d]
        end
      end
      Fiber.schedule do
        sleep 0
        pipes.each_with_index { |(_r, w), i| w.write("p#{i}"); w.close }
      end
      got
    end.value
    pipes_ok = res.each_with_index.all? { |(data, _, _), i| data == "p#{i}" }
    err "sched_stress: a fiber read the wrong bytes" unless pipes_ok
    err "sched_stress: a fiber's structure changed" unless res.all? { |_, ok, _| ok }
    out "sched_stress: #{res.map(&:last).join(' ')}"
  end

  # A Ractor makes a bundle old and writes into it in bulk while incremental majors of its own
  # mark; meanwhile the main Ractor runs minor GCs (each finishes a mark going on), starts a
  # major of its own and writes into its own bundle. The Ractor returns its bundle's digest
  # after the writes and after a full GC that follows them.
  def self.ractor_bulk(slot, n, k, seed)
    $multi_ractor = true
    ra = Ractor.new(n, k, seed) do |nn, kk, sd|
      r = Random.new(sd)
      s = B.bulk_set(r)
      _c1, _c2, _c3, _c4, _c5, _c6, _c7, _c8, _c9, _c10, _c11 = *s[1..11]   # see inc_mark
      3.times { GC.start(full_mark: false) }
      GC.start(full_mark: true, immediate_mark: false)
      nn.times do |i|
        B.bulk_op(s, r, kk)
        GC.start(full_mark: true, immediate_mark: false) if i % 100 == 99
      end
      d = B.dig(s)
      Array.new(3000) { |j| "rb#{j}" }
      GC.start
      [d, B.dig(s)]
    end
    e = get(slot, %i[bulk]) || bulk_new(slot, seed + 1, 0)
    r = rng(seed + 2)
    _c1, _c2, _c3, _c4, _c5, _c6, _c7, _c8, _c9, _c10, _c11 = *e.obj[1..11]
    3.times { GC.start(full_mark: false) }   # minor GCs while the Ractor's majors mark
    GC.start(full_mark: true, immediate_mark: false)
    n.times do |i|
      B.bulk_op(e.obj, r, k)
      GC.start(full_mark: false) if i % 50 == 49
    end
    snap(e)
    d1, d2 = ra.take
    err "ractor_bulk: the Ractor's bundle changed across a full GC" unless d1 == d2
    out "ractor_bulk slot #{slot}: #{d1} #{e.dig}"
  end

  def self.kind_of(o)
    case o
    when Array then :ary
    when Hash then :hash
    when DTList then :list
    when String then :str
    else :obj
    end
  end

  # Finalizers may run in whichever Ractor is running when they are due, where they cannot
  # record anything: a program uses either Ractors or finalizers (generate.rb sees to it).
  def self.ractor(slot, size, seed, shareable)
    $multi_ractor = true
    r = Ractor.new(size, seed, shareable) do |sz, sd, sh|
      o = B.build(Random.new(sd), sz)
      Array.new(sz * 20) { |j| "r#{j}" }
      GC.start if sd.odd?
      d = B.dig(o)
      o = Ractor.make_shareable(o) if sh
      [d, o]
    end
    d, o = r.take
    err "ractor: the structure it returned changed" unless B.dig(o) == d
    out "ractor: #{d}"
    put(slot, shareable ? :frozen : kind_of(o), o) if slot
  end

  def self.bg_start(slot, seed)
    $multi_ractor = true
    r = Ractor.new(seed) do |sd|
      keep = [B.build(Random.new(sd), 30)]
      loop do
        m = Ractor.receive
        break if m == :stop
        next Ractor.yield(:idle) if m == :ping
        sz, s2 = m
        keep << B.build(Random.new(s2), sz)
        keep.shift if keep.size > 3
        Array.new(sz * 30) { |j| "bg#{j}" }
        s2 % 5 == 0 ? GC.compact : GC.start(full_mark: s2.odd?)
        Ractor.yield(keep.map { |x| B.dig(x) })
      end
      keep.map { |x| B.dig(x) }
    end
    put(slot, :bg, r)
    $bg[slot] = r
  end

  def self.bg_poke(slot, size, seed)
    r = $bg[slot] or return
    r.send([size, seed])
    out "bg: #{r.take.join(' ')}"
  end

  def self.stop_bg(r)
    r.send(:stop)
    out "bg stop: #{r.take.join(' ')}"
  end

  def self.bg_stop(slot)
    release(slot) if $bg[slot]
  end

  # fork with other Ractors alive: only while they wait in Ractor.receive. The default GC
  # crashes in the child when another Ractor was allocating at the fork, and its
  # verify_internal_consistency miscounts live slots after such a fork, and after a fork once any
  # Ractor has run (CRuby 3.4.5), so under default the child skips verification then.
  #
  # lazy: fork right after a GC that leaves its sweep to be done lazily (Mosaic: by the
  # background sweeper while the program runs), garbage made first so there is much to sweep.
  def self.fork_check(seed, lazy = false)
    unless $bg.empty?
      $bg.each_value { |r| r.send(:ping); r.take }
      sleep 0.05
    end
    d = state_digest
    rd, wr = IO.pipe
    if lazy
      churn(2000 + seed % 3000, seed % 6)
      GC.start(immediate_sweep: false)
      $reach[:lazy_forks] += 1 if GC.latest_gc_info(:state) == :sweeping
    end
    $reach[:forks] += 1
    pid = fork do
      since = DTReach::PATH && DTReach.figures
      $reach = Hash.new(0)
      rd.close
      msg = "?"
      begin
        $errs = []
        churn(3000 + seed % 5000, seed % 5)
        GC.start(full_mark: seed.odd?)
        compact(seed % 5) if seed % 3 == 0
        check_all(false)
        GC.start
        v = begin
          # The default GC's verifier miscounts live slots in a child forked after any Ractor ran
          # (none alive too: seed 31, 1 run in 4), so under default the child verifies only then.
          GC.verify_internal_consistency unless GC.config[:implementation] == "default" && $multi_ractor
          "ok"
        rescue Exception => ex
          "verify-failed(#{ex.class})"
        end
        msg = "#{state_digest == d} #{$errs.size} #{v} #{$errs.first}"
      rescue Exception => ex
        msg = "exception #{ex.class}: #{ex.message}"
      ensure
        DTReach.write(since)
        wr.write(msg)
        wr.close
        exit!(0)
      end
    end
    wr.close
    msg = rd.read
    rd.close
    _, st = Process.wait2(pid)
    if $bg.empty?
      out "fork: exit=#{st.exitstatus.inspect} signal=#{st.termsig.inspect} child=#{msg}"
      err "fork child: #{msg}" unless msg.start_with?("true 0 ok")
    elsif st.success? && msg.start_with?("true 0 ok")
      out "fork(ractors): ok"
    else
      # run.rb reads default's version of these two lines as "ok" (see its normalize_ref).
      out "fork(ractors): FAILED exit=#{st.exitstatus.inspect} signal=#{st.termsig.inspect} child=#{msg}"
      err "fork child (ractors alive): #{msg}"
    end
  end

  # ---------------- checks ----------------

  def self.state_digest
    h = 0
    $slots.each_with_index do |e, i|
      next unless e && e.dig
      h = B.mix(B.mix(h, i), e.dig)
    end
    h
  end

  def self.check_all(gone)
    bad = 0
    ids = {}
    $slots.each_with_index do |e, i|
      next unless e
      o = e.obj
      if e.dig && %i[str ary hash obj list tree wide misc frozen bulk fin].include?(e.kind)
        now = B.dig(o)
        if now != e.dig
          bad += 1
          err "slot #{i} (#{e.kind}): contents changed"
        end
      end
      if e.kind == :fiber && !o.alive?
        err "fiber slot #{i}: died"
      end
      if e.id
        if o.object_id != e.id
          bad += 1
          err "slot #{i} (#{e.kind}): object_id changed"
        end
        if ids[e.id]
          bad += 1
          err "slot #{i}: object_id shared with slot #{ids[e.id]}"
        end
        ids[e.id] = i
        begin
          x = ObjectSpace._id2ref(e.id)
          unless x.equal?(o)
            bad += 1
            err "slot #{i}: _id2ref gives another object"
          end
        rescue RangeError
          unless $multi_ractor
            bad += 1
            err "slot #{i}: _id2ref of a live object raised"
          end
        end
      end
      e.idents.each do |x, id, d|
        if x.object_id != id || B.dig(x) != d
          bad += 1
          err "slot #{i}: an inner object changed identity or contents"
        end
      end if e.kind != :wm && e.kind != :wkm && e.kind != :fin
      bad += check_weak(i, e, gone) if e.kind == :wm || e.kind == :wkm
      bad += check_held(i, e.obj) if e.kind == :held
    end
    $dead.each do |id, d|
      x = begin
        ObjectSpace._id2ref(id)
      rescue RangeError
        nil
      end
      if x && B.dig(x) != d
        bad += 1
        err "a dropped object's id now names another object"
      end
    end
    $nursery.each_with_index do |s, j|
      next unless s
      unless s == nstr($nursery_k[j])
        bad += 1
        err "nursery #{j} changed"
        break
      end
    end
    $cells.each_with_index do |c, j|
      next unless c
      unless c[0].call == nstr($cells_k[j])
        bad += 1
        err "closure cell #{j} changed"
        break
      end
    end
    $pool.each do |o|
      unless DTTagged === o && (!o.is_a?(DTStr) || o == B.kstr(o.t))
        bad += 1
        err "pool object changed"
        break
      end
    end
    # Every held object of a class is found by each_object (garbage may be found too). Once
    # a Ractor has run, each_object yields only shareable objects: nothing to check then.
    bad += check_each_object(gone) unless $multi_ractor
    unless $fin_bad.empty?
      $fin_bad.uniq.first(3).each { |b| err b }
      $fin_bad.clear unless $errs
      bad += 1
    end
    bad
  end

  def self.check_each_object(gone)
    bad = 0
    found = {}.compare_by_identity
    walking do
      ObjectSpace.each_object(DTKey) { |o| found[o] = true }
      ObjectSpace.each_object(DTCounted) { |o| found[o] = true }
    end
    miss = $pool.count { |o| o.is_a?(DTKey) && !found[o] } + $counted.count { |o| !found[o] }
    if miss > 0
      bad += 1
      err "each_object missed #{miss} held objects"
    end
    if gone
      c = walking { ObjectSpace.each_object(DTCounted).count }
      ok = c >= $counted.size && c <= $counted.size + $counted_dropped / 10 + 16
      out "  counted: held=#{$counted.size} dead-gone=#{ok}"
      err "each_object(DTCounted) found #{c}, #{$counted.size} held, #{$counted_dropped} dropped" unless ok
    end
    bad
  end

  def self.check
    $checks += 1
    check_all(false)
    out "check #{$checks}: #{$slots.compact.map(&:kind).join(',')} digest=#{state_digest}"
  end

  # Dead weak entries and dead objects must be (nearly all) gone after a full GC.
  def self.check_gone
    $checks += 1
    scrub
    GC.start
    GC.start   # a WeakKeyMap drops entries whose keys died at its next marking
    out "check #{$checks} (after a full GC):"
    check_all(true)
    out "  digest=#{state_digest}"
  end

  def self.finish
    $bg.keys.each { |s| release(s) }
    check_gone
    $fin_sentinel = DTFin.new(0, 0)
    define_fin($fin_sentinel, false)
    out "end"
    $fin_live.clear   # at exit every finalizer runs, held or not
    $exiting = true
  end
end
