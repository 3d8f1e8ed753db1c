require_relative "helper"
require_relative "../scripts/options-table"

# Tunables from the environment: bad values warn and fall back; good ones take effect.
class TestMosaicEnv < Test::Unit::TestCase
  include MosaicTestHelper

  def run_with(env, code, args = [])
    out, err, status = EnvUtil.invoke_ruby([{ "RUBY_GC_LIBRARY" => LIB_NAME }.merge(env), *args, "-e", code], "", true, true)
    [out, err, status]
  end

  def test_malformed_value_warns_and_falls_back
    omit "Mosaic's messages" unless mosaic?
    out, err, status = run_with({ "RUBY_GC_HEAP_GROWTH_FACTOR" => "fast", "RUBY_GC_MALLOC_LIMIT" => "12q",
                                  "RUBY_GC_HEAP_FREE_SLOTS" => "lots" },
                                "p GC.config[:heap_growth_factor], GC.config[:malloc_limit_min], GC.config[:heap_free_slots]")
    assert_predicate status, :success?
    assert_match(/invalid value for RUBY_GC_HEAP_GROWTH_FACTOR: fast/, err)
    assert_match(/invalid value for RUBY_GC_MALLOC_LIMIT: 12q/, err)
    assert_match(/invalid value for RUBY_GC_HEAP_FREE_SLOTS: lots/, err)
    assert_equal "1.8\n16777216\n4096\n", out
  end

  def test_bad_incremental_ratio_warns_and_keeps_the_default
    omit "Mosaic's messages" unless mosaic?
    omit "the stress gate's forced collections leave the pacer no say" if ENV["MOSAIC_STRESS_MINOR"]
    omit "MOSAIC_STRESS_INCREMENTAL makes every pacer major mark in steps" if ENV["MOSAIC_STRESS_INCREMENTAL"]
    omit "the ThreadSanitizer build's minor marks pass the 16 ms floor: its majors mark at once" if tsan_build?
    # On the checking build (heap verification after every GC; the ASan and race gates) this
    # ring runs 6-8 majors, and the 3 marked in steps before any mark is timed leave no margin.
    omit "the checking build's ring runs too few majors to tell" if checking_build?
    # (A ring whose 3 ms minors trace about as much as its majors: with no floor on the minors,
    # its majors mark at once under the default ratio and all but the first few in steps under
    # a ratio of 0; under the default floor, in steps. test_incremental.rb.)
    code = "ring = Array.new(150_000); 1_500_000.times { |n| ring[n % 150_000] = \"r\#{n}\" }; " \
           "print GC.stat(:mosaic_incremental_marks), ' ', GC.stat(:major_gc_count)"
    # The room scale off: with less room while its first GCs are cheap, the ring runs 5-7
    # majors instead of 13, too few to tell.
    %w[often -1].each do |bad|
      out, err, status = run_with({ "MOSAIC_INCREMENTAL_RATIO" => bad, "MOSAIC_INCREMENTAL_LONG_MINOR" => "0",
                                    "MOSAIC_GC_TIME_MIN" => "0" }, code)
      assert_predicate status, :success?, err
      assert_match(/\[mosaic\] (invalid value for MOSAIC_INCREMENTAL_RATIO: often|MOSAIC_INCREMENTAL_RATIO=-1\.0+ is ignored)/, err)
      marks, majors = out.split.map(&:to_i)
      assert_operator majors, :>, 3, "the pacer asked for too few majors to tell"
      assert_operator marks, :<, majors / 2, "the default ratio was not kept for #{bad}"
    end
    out, err, status = run_with({ "MOSAIC_INCREMENTAL_LONG_MINOR" => "soon", "MOSAIC_GC_TIME_MIN" => "0" }, code)
    assert_predicate status, :success?, err
    assert_match(/\[mosaic\] invalid value for MOSAIC_INCREMENTAL_LONG_MINOR: soon/, err)
    marks, majors = out.split.map(&:to_i)
    assert_operator marks, :>, 3, "too few majors marked in steps to tell"
    assert_operator marks, :>=, majors - 3, "the default floor (16 ms) was not kept"
  end

  def test_out_of_range_value_warns
    omit "Mosaic's messages" unless mosaic?
    out, err, status = run_with({ "RUBY_GC_HEAP_FREE_SLOTS_MIN_RATIO" => "3" }, "p GC.config[:heap_free_slots_min_ratio]")
    assert_predicate status, :success?
    assert_match(/RUBY_GC_HEAP_FREE_SLOTS_MIN_RATIO=3.0+ is ignored/, err)
    assert_equal "0.2\n", out
  end

  def test_valid_values_take_effect_and_echo_with_w
    omit "Mosaic's keys" unless mosaic?
    env = { "RUBY_GC_HEAP_GROWTH_FACTOR" => "2.0", "RUBY_GC_MALLOC_LIMIT" => "1m", "RUBY_GC_HEAP_FREE_SLOTS" => "8192" }
    out, err, status = run_with(env, "p GC.config[:heap_growth_factor], GC.config[:malloc_limit_min], GC.config[:heap_free_slots]", ["-w"])
    assert_predicate status, :success?
    assert_match(/RUBY_GC_HEAP_GROWTH_FACTOR=2.0/, err)
    assert_match(/RUBY_GC_MALLOC_LIMIT=1048576/, err)
    assert_match(/RUBY_GC_HEAP_FREE_SLOTS=8192/, err)
    assert_equal "2.0\n1048576\n8192\n", out
  end

  def test_init_slots_delay_first_gc
    omit "counts collections; the stress gate forces them" if ENV["MOSAIC_STRESS_MINOR"]
    out, _err, status = run_with({ "RUBY_GC_HEAP_0_INIT_SLOTS" => "400000" },
                                 "c = GC.count; 200_000.times { Object.new }; p GC.count - c")
    assert_predicate status, :success?
    assert_equal "0\n", out
  end

  # RUBY_GC_HEAP_FREE_SLOTS is the default GC's "prepare at least this amount of slots after
  # GC": every GC leaves room for that many 40-byte objects (pace.c). Mosaic used to ignore it,
  # collecting every few thousand allocations of a small heap whatever it said; GC.config
  # changes it at run time.
  def test_heap_free_slots_leaves_room_after_each_gc
    omit "Mosaic's pacing" unless mosaic?
    omit "counts collections; the stress gate forces them" if ENV["MOSAIC_STRESS_MINOR"]
    churn = "GC.start; c = GC.count; 2_000_000.times { Object.new }; print GC.count - c, ' '"
    out, err, status = run_with({}, churn)
    assert_predicate status, :success?, err
    assert_operator out.to_i, :>, 40, "a small heap collects often without the setting"
    out, err, status = run_with({ "RUBY_GC_HEAP_FREE_SLOTS" => "500000" }, churn)
    assert_predicate status, :success?, err
    assert_operator out.to_i, :<=, 6, "2M allocations with room for 500k after each GC"
    out, err, status = run_with({}, "#{churn}; GC.config(heap_free_slots: 500_000); #{churn}")
    assert_predicate status, :success?, err
    without, with = out.split.map(&:to_i)
    assert_operator without, :>, 40
    assert_operator with, :<=, 6
    # A heap that grows while the program mallocs now and then keeps the floor too: any malloc
    # used to end the floor's budget once 16 MiB of fresh pages and malloc together were taken
    # (the growth trigger): 8 GCs for this build-up, 4 now, 28 without the setting.
    build_up = "GC.start; c = GC.count; a = []; 2_000_000.times { |i| a << Object.new; 'm' * 1000 if i % 1000 == 0 }; print GC.count - c"
    out, err, status = run_with({ "RUBY_GC_HEAP_FREE_SLOTS" => "3000000" }, build_up)
    assert_predicate status, :success?, err
    assert_operator out.to_i, :<=, 5
    # A value too large to mean anything (4 TB of room) still collects: one GC's floor budget
    # is at most the pages in use or 32 MiB, so the heap grows by steps with GCs between.
    # (4M objects, 160 MB: with 2M the count depends on whether the old-generation major
    # starts early, to mark in steps, or at the ordinary trigger, to mark at once:
    # MOSAIC_INCREMENTAL_RATIO, DESIGN.md, "Steps only where they shorten the pauses".)
    out, err, status = run_with({ "RUBY_GC_HEAP_FREE_SLOTS" => "100000000000" }, churn.sub("2_000_000", "4_000_000"))
    assert_predicate status, :success?, err
    assert_operator out.to_i, :>=, 2
  end

  # MOSAIC_GC_TIME_MAX / _MIN (pace.c, "the room scale"): where GC takes more of the time than
  # the upper bound while the heap holds steady, the room the free-slot ratios leave grows, and
  # the same program collects less often; where it takes less than the lower bound, the room
  # shrinks (a major keeps fewer pages), and it collects more often. Bounds that every share
  # passes (0.001) or none reaches (0.99) make the direction certain on any machine.
  def test_gc_time_bounds_scale_the_room
    omit "Mosaic's pacing" unless mosaic?
    omit "counts collections; the stress gate forces them" if ENV["MOSAIC_STRESS_MINOR"]
    steady = "keep = Array.new(200_000) { |i| [i] }; GC.start; c = GC.count; " \
             "30.times { |r| 100_000.times { [1, 2] }; GC.start if r % 5 == 4 }; " \
             "c = GC.count; 40.times { 100_000.times { [1, 2] } }; GC.start; " \
             "print GC.count - c, ' ', GC.stat(:mosaic_room_scale_percent), ' ', keep.size"
    off = { "MOSAIC_GC_TIME_MAX" => "0", "MOSAIC_GC_TIME_MIN" => "0" }
    counts = {}
    { off: off, more: { "MOSAIC_GC_TIME_MAX" => "0.001", "MOSAIC_GC_TIME_MIN" => "0" },
      less: { "MOSAIC_GC_TIME_MAX" => "0", "MOSAIC_GC_TIME_MIN" => "0.99" },
      # Every GC a major: the scale is set at every second one.
      less_all_major: { "MOSAIC_GENERATIONAL" => "0", "MOSAIC_GC_TIME_MAX" => "0", "MOSAIC_GC_TIME_MIN" => "0.99" },
    }.each do |name, env|
      out, err, status = run_with(env, steady)
      assert_predicate status, :success?, err
      count, scale, size = out.split.map(&:to_i)
      assert_equal 200_000, size
      counts[name] = [count, scale]
    end
    assert_equal 100, counts[:off][1], "no bounds: the ratios' own room"
    assert_operator counts[:more][1], :>, 100, counts.inspect
    assert_operator counts[:less][1], :<, 100, counts.inspect
    assert_operator counts[:less_all_major][1], :<, 100, counts.inspect
    assert_operator counts[:more][0], :<, counts[:off][0], counts.inspect
    assert_operator counts[:less][0], :>, counts[:off][0], counts.inspect
  end

  def test_gc_time_bounds_from_the_environment
    omit "Mosaic's own variables" unless mosaic?
    show = "p GC.config.values_at(:gc_time_max, :gc_time_min)"
    out, err, status = run_with({ "MOSAIC_GC_TIME_MAX" => "0.1" }, show)
    assert_predicate status, :success?, err
    assert_equal "[0.1, 0.1]\n", out, "a lower bound above the upper one follows it"
    out, err, status = run_with({ "MOSAIC_GC_TIME_MAX" => "0.3", "MOSAIC_GC_TIME_MIN" => "0.4" }, show)
    assert_predicate status, :success?, err
    assert_match(/MOSAIC_GC_TIME_MIN=0.400000 is ignored/, err)
    assert_equal "[0.3, 0.15]\n", out
    out, err, status = run_with({ "MOSAIC_GC_TIME_MAX" => "0", "MOSAIC_GC_TIME_MIN" => "0.9" }, show)
    assert_predicate status, :success?, err
    assert_equal "[0.0, 0.9]\n", out, "no upper bound: any lower one"
  end

  def test_mosaic_verify_checks_heap_after_every_gc
    omit "Mosaic's own variable" unless mosaic?
    code = "a = Array.new(50_000) { |i| [i.to_s] }; 3.times { GC.start }; 100_000.times { {} }; " \
           "p GC.config[:verify_after_gc], a.last.first"
    out, err, status = run_with({ "MOSAIC_VERIFY" => "1" }, code)
    assert_predicate status, :success?, err
    assert_equal "true\n\"49999\"\n", out
    out, _err, status = run_with({ "MOSAIC_VERIFY" => "maybe" }, "p GC.config[:verify_after_gc]")
    assert_predicate status, :success?
    assert_equal "false\n", out
  end

  # Factors far out of the usual range are clamped, never converted with overflow: a huge
  # old-object factor used to make every GC major, a huge growth factor made growth 0.
  # Values that are not finite are rejected with a warning. (Review bug 8.)
  def test_extreme_factors_are_clamped_and_non_finite_rejected
    omit "Mosaic's pacing" unless mosaic?
    omit "reads why GCs ran; the stress gate forces them" if ENV["MOSAIC_STRESS_MINOR"]
    code = "GC.start; 3.times { 300_000.times { Object.new } }; " \
           "p GC.stat(:minor_gc_count) > 0, GC.latest_gc_info(:major_by), GC.stat(:old_objects_limit) >= 2**60"
    out, err, status = run_with({ "RUBY_GC_HEAP_OLDOBJECT_LIMIT_FACTOR" => "1e300" }, code)
    assert_predicate status, :success?, err
    assert_equal "true\nnil\ntrue\n", out
    # With a goal ratio of 0 a growth step is total * (factor - 1), as in the default GC (with
    # one, the factor only caps the step). Growth is taken in steps of 1/8 of the heap between
    # GCs (pace.c), so a huge factor still means a few GCs (6 measured); a factor that
    # collapsed to no growth means one GC per page (185 measured with a factor of 1.0000001).
    out, err, status = run_with({ "RUBY_GC_HEAP_GROWTH_FACTOR" => "1e300", "RUBY_GC_HEAP_FREE_SLOTS_GOAL_RATIO" => "0" },
                                "a = Array.new(300_000) { Object.new }; p GC.count < 20, a.size")
    assert_predicate status, :success?, err
    assert_equal "true\n300000\n", out
    out, err, status = run_with({ "RUBY_GC_HEAP_GROWTH_FACTOR" => "inf", "RUBY_GC_HEAP_OLDOBJECT_LIMIT_FACTOR" => "nan" },
                                "p GC.config[:heap_growth_factor], GC.config[:oldobject_limit_factor]")
    assert_predicate status, :success?
    assert_match(/invalid value for RUBY_GC_HEAP_GROWTH_FACTOR: inf/, err)
    assert_match(/invalid value for RUBY_GC_HEAP_OLDOBJECT_LIMIT_FACTOR: nan/, err)
    assert_equal "1.8\n2.0\n", out
  end
  # ------------------------------------------------------------------ the options table

  # src/core/options.def, the one table of options, against the library: each row's range is
  # the one the library enforces, its default the one it keeps, its GC.config key the one that
  # reports it (test_options.rb checks the table against the sources and the README).
  OPTIONS = MosaicOptions.parse
  UNIFORM = OPTIONS.select { |r| %i[size number switch].include?(r.kind) }

  # The custom rows (their ACCEPTS is prose): a value just outside each one's range, and what the
  # library says of it. A new custom row needs its entry here.
  CUSTOM_BELOW = {
    "RUBY_GC_HEAP_<i>_INIT_SLOTS" => ["RUBY_GC_HEAP_0_INIT_SLOTS", "-1", /invalid value for RUBY_GC_HEAP_0_INIT_SLOTS: -1 \(keeping 10000\)/],
    "RUBY_GC_MALLOC_LIMIT_MAX" => ["RUBY_GC_MALLOC_LIMIT_MAX", "-1", /invalid value for RUBY_GC_MALLOC_LIMIT_MAX: -1 \(keeping 33554432\)/],
    "RUBY_GC_OLDMALLOC_LIMIT_MAX" => ["RUBY_GC_OLDMALLOC_LIMIT_MAX", "-1", /invalid value for RUBY_GC_OLDMALLOC_LIMIT_MAX: -1 \(keeping 134217728\)/],
    "MOSAIC_STRESS_RACES" => ["MOSAIC_STRESS_RACES", "-1", /invalid value for MOSAIC_STRESS_RACES: -1 \(keeping 0\)/],
    "MOSAIC_AUTO_COMPACT" => ["MOSAIC_AUTO_COMPACT", "sometimes", /invalid value for MOSAIC_AUTO_COMPACT: sometimes \(off, fragmentation or always; keeping off\)/],
    "MOSAIC_MEMORY_LIMIT" => ["MOSAIC_MEMORY_LIMIT", "1023k", /MOSAIC_MEMORY_LIMIT=1047552 is ignored because it must be at least 1048576 \(keeping 0\)/],
    "MOSAIC_GC_THREADS" => ["MOSAIC_GC_THREADS", "0", /MOSAIC_GC_THREADS=0 is ignored because it must be at least 1 /],
    "MOSAIC_BACKGROUND_SWEEP" => ["MOSAIC_BACKGROUND_SWEEP", "-1", /invalid value for MOSAIC_BACKGROUND_SWEEP: -1 /],
    "MOSAIC_VERIFY" => ["MOSAIC_VERIFY", "-1", /invalid value for MOSAIC_VERIFY: -1 \(keeping 0\)/],
    "MOSAIC_SIZE_CLASSES" => ["MOSAIC_SIZE_CLASSES", "32,64", /invalid value for MOSAIC_SIZE_CLASSES: 32,64 \(32 is not a multiple of 8 from 40 to 1032; keeping 40,80,160,320,640\)/],
    "MOSAIC_SIZE_HISTOGRAM_OUT" => nil,   # any path; the size-histogram build's
  }.freeze
  # The custom rows with an upper bound: a value above it is taken as the bound.
  CUSTOM_ABOVE = {
    "MOSAIC_GC_THREADS" => ["MOSAIC_GC_THREADS", "65", /MOSAIC_GC_THREADS=65 is taken as 64/],
    "MOSAIC_STRESS_RACES" => ["MOSAIC_STRESS_RACES", "100001", /MOSAIC_STRESS_RACES=100001 is taken as 100000/],
    "MOSAIC_VERIFY" => ["MOSAIC_VERIFY", "2", /MOSAIC_VERIFY=2 is taken as 1/],
  }.freeze
  # A value other than the default for the custom rows' GC.config keys.
  CUSTOM_CONFIG = { "malloc_limit_max" => "64 << 20", "auto_compact_policy" => ":always",
                    "memory_limit" => "512 << 20", "verify_after_gc" => "true" }.freeze

  # What GC.config reports, per key, from `puts "key=value.inspect"` lines.
  CONFIG_SCRIPT = 'GC.config.each { |k, v| puts "#{k}=#{v.inspect}" }'

  def option_defaults
    UNIFORM.to_h { |r| [r.field, MosaicOptions.value(r.default)] }
  end

  # A number bound's value: a number, or another row's value in `values`.
  def option_bound(bound, values)
    bound.is_a?(Array) ? values.fetch(bound[1]) : MosaicOptions.value(bound)
  end

  # GC.config's text for a uniform row, as a number (switches as 0 and 1).
  def config_number(text)
    { "true" => 1, "false" => 0 }.fetch(text) { text.include?(".") ? Float(text) : Integer(text) }
  end

  def warning_for(name, err)
    err.lines.grep(/\A\[mosaic\] (?:invalid value for #{Regexp.escape(name)}:|#{Regexp.escape(name)}[= ])/)
  end

  def test_option_values_just_outside_the_table_ranges_warn_and_keep_the_defaults
    omit "Mosaic's messages" unless mosaic?
    assert_equal OPTIONS.map(&:name).sort, (UNIFORM.map(&:name) + CUSTOM_BELOW.keys).sort,
                 "each custom row of src/core/options.def needs a value outside its range in CUSTOM_BELOW"
    defaults = option_defaults
    # Below: a size less than its MIN, a negative switch, a number at its exclusive lower bound
    # (just below 0 where 0 is allowed). Above: a number just over its upper bound. Bounds that
    # are other rows' values are at those rows' defaults: every value here is refused.
    { below: CUSTOM_BELOW, above: CUSTOM_ABOVE }.each do |side, custom|
      values = UNIFORM.filter_map do |r|
        v = case [side, r.kind]
            in [:below, :size] then r.min == "0" ? "-1" : (MosaicOptions.value(r.min) - 1).to_s
            in [:below, :switch] then "-1"
            in [:below, :number]
              lower = option_bound(r.lower, defaults)
              r.zero_ok && lower.zero? ? "-0.001" : lower.to_f.to_s
            in [:above, :number] if r.upper then (option_bound(r.upper, defaults) + 0.001).round(6).to_s
            else nil
            end
        [r, v] if v
      end
      # Only these values: a gate's own settings (a GC every 1000 allocations, every mark
      # parallel) are left out; the clamp of the race delays is checked where the delays are
      # ignored (the checking build would wait up to 100 ms at every hand-over).
      env = OPTIONS.reject { |r| r.name.include?("<") }.to_h { |r| [r.name, nil] }
      values.each { |r, v| env[r.name] = v }
      custom = custom.reject { |row, _| row == "MOSAIC_STRESS_RACES" } if side == :above && checking_build?
      custom.each_value { |name, v, _| env[name] = v if name }
      out, err, status = run_with(env, CONFIG_SCRIPT)
      assert_predicate status, :success?, err
      config = out.lines.to_h { |l| l.chomp.split("=", 2) }
      values.each do |r, v|
        m = err.match(/^\[mosaic\] (?:invalid value for #{r.name}: #{Regexp.escape(v)} |#{r.name}=\S+ is ignored because it must be .*)\(keeping (\S+)\)$/)
        assert m, "#{r.name}=#{v} is outside the table's range, but no warning says so:\n#{err}"
        kept = r.kind == :number ? Float(m[1]) : Integer(m[1])
        assert_equal MosaicOptions.value(r.default), kept, "#{r.name}: the default kept is not the table's"
        next unless r.config
        assert_equal MosaicOptions.value(r.default), config_number(config.fetch(r.config[1])),
                     "#{r.name}: GC.config[:#{r.config[1]}] is not the table's default"
      end
      custom.each { |row, (_name, _v, message)| assert_match message, err, row if message }
    end
  end

  # A value at the inclusive end of each size's, switch's and number's range, or just inside
  # an exclusive one, is taken: no warning, and GC.config reports it. Rows of the checking build
  # say they need it on any other build.
  def test_option_values_at_the_edges_of_the_table_ranges_are_taken
    omit "Mosaic's messages" unless mosaic?
    values = option_defaults
    referenced = UNIFORM.flat_map { |r| [r.lower, r.upper] }.grep(Array).map(&:last)
    set = UNIFORM.filter_map do |r|
      v = case r.kind
          when :size then MosaicOptions.value(r.min)
          when :switch then r.default == "0" ? 1 : 0
          when :number
            lower = option_bound(r.lower, values)
            upper = r.upper && option_bound(r.upper, values)
            # a bound of another row stays clear of its own bounds
            v = if r.zero_ok then 0.0
                elsif upper && !referenced.include?(r.field) then upper
                else (lower + 0.01).round(6)
                end
            next unless (r.zero_ok && v.zero?) || (v > lower && (upper.nil? || v <= upper))
            v
          end
      values[r.field] = v
      [r, v]
    end
    assert_operator set.size, :>=, UNIFORM.size - 1
    out, err, status = run_with(set.to_h { |r, v| [r.name, v.to_s] }, CONFIG_SCRIPT)
    assert_predicate status, :success?, err
    config = out.lines.to_h { |l| l.chomp.split("=", 2) }
    set.each do |r, v|
      if r.build == :CHECKING && !checking_build?
        assert_equal ["[mosaic] #{r.name} is ignored: it needs the checking build (make CHECK=1)\n"], warning_for(r.name, err)
      else
        assert_empty warning_for(r.name, err), "#{r.name}=#{v} is inside the table's range"
      end
      assert_equal v, config_number(config.fetch(r.config[1])), "GC.config[:#{r.config[1]}] after #{r.name}=#{v}" if r.config
    end
  end

  # Each GC.config key of the table is reported; GC.config(key: value) changes a CONFIG key, and
  # leaves a CONFIG_READ one as it was.
  def test_option_gc_config_keys
    omit "Mosaic's keys" unless mosaic?
    defaults = option_defaults
    keyed = OPTIONS.select(&:config)
    assert_equal keyed.reject { |r| UNIFORM.include?(r) }.map { |r| r.config[1] }.sort, CUSTOM_CONFIG.keys.sort
    script = keyed.map do |r|
      access, key = r.config
      other = CUSTOM_CONFIG.fetch(key) do
        d = defaults.fetch(r.field)
        case r.kind
        when :switch then d.zero? ? "true" : "false"
        when :size then (d.zero? ? 1 : d * 2).to_s
        else ((d + option_bound(r.lower, defaults)) / 2.0).round(6).to_s   # within both GC.config's range and the table's
        end
      end
      "raise 'no GC.config key #{key}' unless GC.config.key?(:#{key}); old = GC.config[:#{key}]; " \
        "GC.config(#{key}: #{other}); puts '#{key} #{access} ' + (GC.config[:#{key}] != old).to_s; GC.config(#{key}: old)"
    end.join("\n")
    out, err, status = run_with({}, script)
    assert_predicate status, :success?, err
    expected = keyed.map { |r| "#{r.config[1]} #{r.config[0]} #{r.config[0] == :rw}\n" }
    assert_equal expected.join, out
  end
end
