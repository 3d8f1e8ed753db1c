require_relative "helper"

# Size classes (src/space/size_class.c): the table MOSAIC_SIZE_CLASSES chooses at boot, slot sizes that are any
# multiple of 8 (side bitmaps indexed by slot number), and what CRuby derives from the table.
class TestMosaicSizeClasses < Test::Unit::TestCase
  include MosaicTestHelper

  def setup
    omit "MOSAIC_SIZE_CLASSES is Mosaic's" unless mosaic?
  end

  def run_with(env, code)
    EnvUtil.invoke_ruby([{ "RUBY_GC_LIBRARY" => LIB_NAME }.merge(env), "-robjspace", "-rjson", "-e", code], "", true, true)
  end

  def slot_sizes_code
    "p GC.stat_heap.values.map { |h| h[:slot_size] }, GC::INTERNAL_CONSTANTS[:HEAP_COUNT]"
  end

  def test_named_tables_and_lists_choose_the_classes
    { "default" => [40, 80, 160, 320, 640],
      "fine" => [40, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 640],
      "large" => [40, 80, 160, 320, 640, 1024],
      "cacheline" => [64, 128, 256, 512, 640],
      "40,56,72,104,1032" => [40, 56, 72, 104, 1032] }.each do |value, sizes|
      out, err, status = run_with({ "MOSAIC_SIZE_CLASSES" => value }, slot_sizes_code)
      assert_predicate status, :success?, err
      assert_equal "#{sizes.inspect}\n#{sizes.size}\n", out, value
      assert_empty err, value
    end
  end

  def test_bad_value_warns_and_keeps_the_default
    ["40,44", "32,80", "80,40", "40,1040", "tiny", "40,,80", "-40", (1..17).map { |i| 40 + 8 * i }.join(",")].each do |value|
      out, err, status = run_with({ "MOSAIC_SIZE_CLASSES" => value }, slot_sizes_code)
      assert_predicate status, :success?, err
      assert_match(/invalid value for MOSAIC_SIZE_CLASSES: #{Regexp.escape(value)} \(.*; keeping 40,80,160,320,640\)/, err)
      assert_equal "[40, 80, 160, 320, 640]\n5\n", out, value
    end
  end

  # A string embeds in the smallest class that holds it: with 8-byte steps, 16 to 23
  # characters (41 to 48 bytes with the header and the terminator) take a 48-byte slot.
  def test_requests_take_the_smallest_class_that_fits
    out, err, status = run_with({ "MOSAIC_SIZE_CLASSES" => "40,48,56,64,1032" },
                                "p [15, 16, 23, 24, 31, 32].map { |n| ObjectSpace.memsize_of('x' * n) }")
    assert_predicate status, :success?, err
    assert_equal "[40, 48, 48, 56, 56, 64]\n", out
  end

  # A 1024-byte class embeds an array of up to 126 elements: no malloc'd buffer.
  def test_large_class_embeds_arrays
    code = "a = Array.new(100) { |i| i }; p ObjectSpace.memsize_of(a), a.sum"
    out, err, status = run_with({ "MOSAIC_SIZE_CLASSES" => "large" }, code)
    assert_predicate status, :success?, err
    assert_equal "1024\n4950\n", out
  end

  # Cache-line classes: pages start their slots on a 64-byte line, so every slot of a size
  # that is a multiple of 64 starts on a line.
  def test_cacheline_slots_start_on_a_line
    code = <<~RUBY
      objs = Array.new(3000) { |i| i.even? ? "x" * (i % 600) : Array.new(i % 70, i) }
      p objs.map { |o| JSON.parse(ObjectSpace.dump(o))["address"].to_i(16) % 64 }.uniq
    RUBY
    out, err, status = run_with({ "MOSAIC_SIZE_CLASSES" => "cacheline" }, code)
    assert_predicate status, :success?, err
    assert_equal "[0]\n", out
  end

  # Slot sizes that are not multiples of 40 through marking, minor and major GCs, sweeping,
  # compaction across classes and the heap check (which, in the checking build, runs after
  # every collection and checks that no bitmap bit lies beyond a page's slots).
  def test_odd_sizes_survive_collections_and_compaction
    code = <<~RUBY
      srand(9)
      keep = []
      20.times do |round|
        objs = Array.new(4000) do |i|
          case i % 4
          when 0 then "s" * rand(900)
          when 1 then Array.new(rand(120)) { |j| j }
          when 2 then o = Object.new; rand(12).times { |j| o.instance_variable_set(:"@v\#{j}", j) }; o
          else { a: i, b: [i], c: i.to_s }
          end
        end
        keep.concat(objs.each_slice(7).map(&:first))
        GC.start(full_mark: round.even?)
      end
      GC.compact
      raise "heap check" unless GC.verify_internal_consistency.nil?
      p keep.size, keep.count { |o| o.is_a?(String) }, GC.stat_heap.size
    RUBY
    out, err, status = run_with({ "MOSAIC_SIZE_CLASSES" => "40,56,72,104,136,200,264,456,1032" }, code)
    assert_predicate status, :success?, err
    assert_equal "11440\n2860\n9\n", out
  end
end
