#!/usr/bin/env ruby
# Usage: generate.rb SEED [--steps N] [--auto-compact]
# Prints a self-contained, reproducible Ruby program (prelude.rb + random steps) to stdout.
# Each step is one line between "#@@ steps" and "#@@ end", so the shrinker can delete any of
# them; every step tolerates the absence of any other.
module DiffGen
  PRELUDE = File.join(__dir__, "prelude.rb")
  NSLOTS = 12
  STR_LENS = [0, 1, 7, 15, 16, 23, 24, 40, 55, 56, 63, 64, 100, 135, 136, 200, 295, 296, 400, 615, 616, 1000, 3000, 20_000].freeze
  ARY_LENS = [0, 1, 2, 3, 4, 5, 8, 9, 17, 18, 19, 38, 39, 40, 77, 78, 79, 120, 300, 2000].freeze

  # auto_compact: the program turns GC.auto_compact on first (its first step), so every major
  # GC compacts until a step turns it off.
  def self.program(seed, nsteps = nil, auto_compact: false)
    header = <<~H
      # Mosaic difftest program, seed #{seed} (test/diff/generate.rb #{seed}#{auto_compact ? ' --auto-compact' : ''}).
      # Run under two GCs and compare stdout: RUBY_GC_LIBRARY=default|mosaic ruby THIS_FILE
    H
    st = steps(seed, nsteps)
    st.unshift("S.auto_compact(true, 0)") if auto_compact
    header + File.read(PRELUDE) + "\n#@@ steps\n" + st.join("\n") + "\n#@@ end\nS.finish\n"
  end

  def self.steps(seed, nsteps = nil)
    g = Gen.new(seed)
    g.run(nsteps || 30 + g.r.rand(40))
    g.out
  end

  class Gen
    attr_reader :r, :out

    def initialize(seed)
      @r = Random.new(seed)
      @out = []
    end

    def sd = @r.rand(1 << 30)
    def slot = @r.rand(NSLOTS)
    def pick(a) = a[@r.rand(a.size)]
    def bool = @r.rand(2) == 0
    def tri = pick([true, false, nil])
    def emit(s) = @out << s
    def call(m, *args) = emit("S.#{m}(#{args.map(&:inspect).join(', ')})")

    def mode = pick(%i[old old young eph eph])

    WEIGHTS = {
      new_struct: 16, grow: 8, shrink: 6, mutate: 10, drop: 3, move: 2, take_id: 2, ident: 3,
      freeze: 1, fin_slot: 2, gc: 12, age: 3, churn: 6, pool: 2, wm_new: 3, wm_put: 12,
      wm_overwrite: 3, wm_del: 2, wm_unhold: 3, wkm_clear: 1, fin: 4, fin_undef: 1,
      fin_shrink: 1, counted: 2, fiber_new: 2, fiber_poke: 3, fiber_end: 1, threads: 2,
      ractor: 2, bg_start: 2, bg_poke: 2, bg_stop: 1, fork: 2, stress: 1, disabled: 2,
      check: 5, check_gone: 2, old_map_young: 6, ractor_fork: 2,
      compact: 4, auto_compact: 2, held: 4, walk_compact: 1, warmup: 1, alloc_trace: 1, fin_compact: 1,
      resize_move: 1,
      bulk: 4, inc_mark: 3, thread_mix: 2, fiber_mix: 2, fork_sweep: 2, ractor_bulk: 2,
      sched_stress: 1
    }.freeze
    TOTAL = WEIGHTS.values.sum
    FIN_STEPS = %i[fin fin_undef fin_shrink fin_slot fin_compact].freeze
    RACTOR_STEPS = %i[ractor bg_start bg_poke bg_stop ractor_fork ractor_bulk].freeze

    def run(n)
      # Finalizers can run inside any live Ractor, where they cannot record anything; a
      # program uses Ractors or finalizers, not both.
      @ractors = @r.rand(3) == 0
      call(:pool, 20 + @r.rand(200), sd) if @r.rand(4) != 0
      if @r.rand(3) == 0
        call(:wm_new, slot, bool)
      end
      while @out.size < n
        x = @r.rand(TOTAL)
        WEIGHTS.each do |k, w|
          if x < w
            send(k) unless (@ractors ? FIN_STEPS : RACTOR_STEPS).include?(k)
            break
          end
          x -= w
        end
      end
    end

    def new_struct
      s = slot
      case @r.rand(8)
      when 0 then call(:new_str, s, @r.rand(10) == 0 ? @r.rand(50_000) : pick(STR_LENS), sd)
      when 1 then call(:new_ary, s, pick(ARY_LENS), sd)
      when 2 then call(:new_hash, s, pick([0, 1, 7, 8, 9, 16, 17, 50, 300]), sd)
      when 3 then call(:new_obj, s, @r.rand(4) == 0 ? @r.rand(120) : @r.rand(12), sd)
      when 4 then call(:new_list, s, pick([1, 10, 100, 1000, 5000, 30_000]), sd)
      when 5 then call(:new_tree, s, 2 + @r.rand(9), sd)
      when 6 then call(:new_wide, s, pick([100, 1000, 5000, 20_000]), sd)
      else call(:new_misc, s, sd)
      end
    end

    def grow = call(:grow, slot, pick([1, 2, 5, 10, 40, 100, 700]), sd)
    def shrink = call(:shrink, slot, pick([1, 2, 5, 10, 40, 100]), sd)
    def mutate = call(:mutate, slot, pick([1, 3, 10, 50]), sd)
    def drop = call(:drop, slot)
    def move = call(:move, slot, slot)
    def take_id = call(:take_id, slot)
    def ident = call(:ident, slot, sd)
    def freeze = call(:freeze, slot)
    def fin_slot = call(:fin_slot, slot)

    def gc
      case @r.rand(4)
      when 0 then call(:gc, tri, tri, tri)
      when 1 then call(:gc, false, true, nil)
      when 2 then call(:minor2)
      else call(:gc, pick([true, false]), pick([true, false]), pick([true, false]))
      end
    end

    def age = call(:age, pick([1, 2, 3, 4, 4]))
    def churn = call(:churn, pick([500, 2000, 5000, 20_000]), @r.rand(6))
    def pool = call(:pool, pick([10, 50, 200]), sd)
    def wm_new = call(:wm_new, slot, bool)
    def wm_put = call(:wm_put, slot, pick([1, 5, 20, 100, 300]), sd, mode, pick(%i[old old young eph eph int]))
    def wm_overwrite = call(:wm_overwrite, slot, pick([1, 5, 30]), sd, pick(%i[old young eph int]))
    def wm_del = call(:wm_del, slot, pick([1, 5, 30]), sd)
    def wm_unhold = call(bool ? :wm_unhold : :wm_unhold_val, slot, pick([1, 5, 30, 100]), sd)
    def wkm_clear = call(:wkm_clear, slot)
    def fin = call(:fin, bool ? slot : nil, pick([1, 5, 20, 100]), sd)
    def fin_undef = call(:fin_undef, slot, pick([1, 3, 10]))
    def fin_shrink = call(:fin_shrink, slot, pick([1, 3, 10]))

    def counted
      n = pick([100, 500, 2000])
      bool ? call(:counted, n, @r.rand(n / 2)) : call(:counted_drop, pick([10, 100, 1000]))
    end

    def fiber_new = call(:fiber_new, slot, pick([5, 20, 100]), sd)
    def fiber_poke = call(:fiber_poke, slot, @r.rand(3000))
    def fiber_end = call(:fiber_end, slot)
    def threads = call(:threads, bool ? slot : nil, 2 + @r.rand(3), pick([10, 50, 200]), sd)
    def ractor = call(:ractor, bool ? slot : nil, pick([5, 20, 80]), sd, bool)
    def bg_start = call(:bg_start, slot, sd)
    def bg_poke = call(:bg_poke, slot, pick([5, 20, 80]), sd)
    def bg_stop = call(:bg_stop, slot)
    def fork = call(:fork_check, sd)
    def stress = call(:stress, pick([true, true, 1, 2, 4]), pick([3, 10, 20]), sd)
    def disabled = call(:disabled, pick([100, 1000, 5000]), sd, pick([true, false, false, :compact]))
    def check = call(:check)

    # Compaction: GC.compact and verify_compaction_references of every kind (prelude's
    # S.compact), GC.auto_compact on/off, a compaction inside a heap walk, and "held" bundles
    # (objects held in every way identity matters), made and then maybe moved at once.
    def compact = call(:compact, pick([0, 0, 1, 1, 2, 3, 4]))
    def auto_compact = call(:auto_compact, bool, pick([0, 1, 2]))
    def held = call(:held, slot, pick([1, 6, 30, 200]), sd, pick([nil, nil, 0, 1, 2, 3, 4]), !@ractors)
    def walk_compact = call(bool ? :walk_compact : :walk_compact_ext, pick([0, 1]))
    def warmup = call(:warmup)

    # A structure whose best size class changes (a string, array, object or hash made across
    # the slot sizes, then shrunk or grown a lot), then a compaction: Mosaic then moves it to
    # another class (up or down, re-embedding its content), and the check reads it back.
    def resize_move
      s = slot
      case @r.rand(4)
      when 0 then call(:new_str, s, pick([100, 300, 600, 1000, 3000]), sd)
      when 1 then call(:new_ary, s, pick([3, 20, 40, 80, 120]), sd)
      when 2 then call(:new_obj, s, pick([3, 20, 60, 100]), sd)
      else call(:new_hash, s, pick([7, 9, 17, 50]), sd)
      end
      call(:age, 1) if bool
      call(bool ? :shrink : :grow, s, pick([5, 40, 100, 600]), sd)
      call(:compact, pick([0, 0, 1, 2]))
      call(:check)
    end
    def alloc_trace = call(:alloc_trace, pick([10, 100, 1000]), sd, pick([0, 1, 2]))
    def fin_compact = call(:fin_compact, pick([1, 2]), sd)
    def check_gone = call(:check_gone)

    # Bulk writes (CRuby reports them to the GC as rb_gc_writebarrier_remember: "obj changed")
    # into old containers, young objects their only referents: a bundle made and aged first
    # (or by the step itself), or an Array or Hash a slot holds.
    def bulk
      s = slot
      case @r.rand(6)
      when 0
        call(:bulk_new, s, sd, pick([0, 3, 3, 4]))
        call(:bulk, s, pick([20, 50, 120]), pick([3, 17, 24, 40, 60]), sd)
      when 1 then call(:bulk_into, s, pick([5, 20, 60]), pick([3, 17, 30, 80]), sd)
      else call(:bulk, s, pick([20, 50, 120]), pick([3, 17, 24, 40, 60]), sd)
      end
    end

    # An incremental major with the mutator at work while it marks: bulk writes, stores of
    # young objects into old ones, garbage and churn; then checks.
    def inc_mark
      s = slot
      call(:bulk_new, s, sd, pick([3, 4])) if @r.rand(4) == 0
      call(:inc_mark, s, pick([64, 128, 256]), pick([17, 17, 24, 40, 60]), sd, pick([0, 1000, 3000]))
      call(pick(%i[check check check_gone])) if bool
    end

    def thread_mix = call(:thread_mix, bool ? slot : nil, 2 + @r.rand(3), pick([20, 40, 80]), sd)
    def fiber_mix = call(:fiber_mix, bool ? slot : nil, 2 + @r.rand(4), pick([40, 100, 250]), sd)
    def sched_stress = call(:sched_stress, 1 + @r.rand(3), pick([2, 5, 10]), pick([true, true, 1, 2, 4]), sd)

    # fork right after a GC that leaves a lazy sweep (Mosaic's background sweeper runs).
    def fork_sweep = call(:fork_check, sd, true)

    def ractor_bulk = call(:ractor_bulk, slot, pick([50, 100, 200]), pick([17, 24, 40]), sd)

    # fork while another Ractor is alive (and maybe busy right before).
    def ractor_fork
      s = slot
      call(:bg_start, s, sd)
      call(:bg_poke, s, pick([5, 20, 80]), sd) if bool
      call(:churn, pick([500, 5000]), @r.rand(6)) if bool
      call(:fork_check, sd)
      call(:bg_poke, s, pick([5, 20]), sd) if bool
    end

    # The generational trap: an old map, young referents, minor GCs only.
    def old_map_young
      s = slot
      call(:wm_new, s, bool) if @r.rand(3) != 0
      call(:age, 4) if @r.rand(4) != 0
      @r.rand(1..3).times { call(:wm_put, s, pick([5, 20, 100]), sd, pick(%i[old young eph]), pick(%i[young young eph int int old])) }
      call(:gc, false, true, nil) if @r.rand(3) != 0
      call(pick(%i[wm_unhold wm_unhold_val wm_unhold_val]), s, pick([5, 30, 100]), sd) if @r.rand(4) != 0
      call(:minor2) if @r.rand(4) != 0
      bool ? call(:churn, pick([2000, 5000, 10_000]), pick([0, 2, 5, 5, 5])) : call(:pool, pick([100, 300]), sd)
      call(:gc, false, true, nil) if bool
      call(pick(%i[check check check_gone]))
    end
  end
end

if $0 == __FILE__
  seed = Integer(ARGV[0] || abort("usage: generate.rb SEED [--steps N] [--auto-compact]"))
  i = ARGV.index("--steps")
  print DiffGen.program(seed, i && Integer(ARGV[i + 1]), auto_compact: ARGV.include?("--auto-compact"))
end
