require_relative "helper"
require "json"
require "tmpdir"

# The size-histogram variant (src/introspect/size_histogram.c, `make install-histogram`): its JSON at exit
# counts what a program really asked for. Runs the variant itself, whatever GC this suite is
# under; omitted when librubygc.mosaic_hist.so is not installed.
class TestMosaicSizeHistogram < Test::Unit::TestCase
  include MosaicTestHelper

  HIST_LIB = File.join(RbConfig::CONFIG["modular_gc_dir"].to_s, "librubygc.mosaic_hist.so")

  def buckets(json, section, type)
    (json.dig(section, type, "buckets") || []).to_h { |upper, count, bytes| [upper, [count, bytes]] }
  end

  def test_counts_strings_of_a_known_length
    omit "librubygc.mosaic_hist.so is not installed (make install-histogram)" unless File.file?(HIST_LIB)
    Dir.mktmpdir("mosaic-size-histogram-test-") do |dir|
      out = File.join(dir, "h.json")
      # A 100-byte string is embedded: 24 bytes of header (flags, klass, len) + 100 + NUL = 125,
      # in the 8-byte bucket (120, 128]. Five rounds of 10_000 become garbage.
      code = <<~'RUBY'
        def round = Array.new(10_000) { "y" * 100 }.size
        5.times { round; GC.start }
        puts GC.config[:implementation]
      RUBY
      stdout, stderr, status = EnvUtil.invoke_ruby(
        [{ "RUBY_GC_LIBRARY" => "mosaic_hist", "MOSAIC_SIZE_HISTOGRAM_OUT" => out }, "-e", code], "", true, true)
      assert_predicate status, :success?, stderr
      assert_equal "mosaic\n", stdout
      assert_path_exist out
      json = JSON.parse(File.read(out))
      assert_equal [40, 80, 160, 320, 640], json["slot_sizes"]

      count, bytes = buckets(json, "alloc", "T_STRING")[128]
      assert_operator count, :>=, 50_000, "T_STRING allocations in (120, 128]"
      assert_operator bytes, :>=, 125 * 50_000
      assert_operator bytes, :<=, 128 * count
      # Every type's counts add up to its total; nothing is recorded in a bucket it cannot hold.
      %w[alloc death_optimal].each do |section|
        json[section].each do |type, h|
          assert_equal h["total"], h["buckets"].sum { |_, n, _| n }, "#{section} #{type}"
          h["buckets"].each do |upper, n, b|
            assert_operator b, :<=, upper * n, "#{section} #{type} bucket #{upper}" if upper > 0
            assert_operator b, :>, (upper - 8) * n, "#{section} #{type} bucket #{upper}" if upper > 0
          end
        end
      end

      # Most of those strings died in a sweep, each with its optimal size 125.
      dead, = buckets(json, "death_optimal", "T_STRING")[128]
      assert_operator dead.to_i, :>=, 30_000, "T_STRING deaths in (120, 128]"
      # They lived in the 160-byte class.
      assert_operator json.dig("death_slot", "T_STRING", 2).to_i, :>=, 30_000
    end
  end

  def test_without_the_variable_nothing_is_written
    omit "librubygc.mosaic_hist.so is not installed (make install-histogram)" unless File.file?(HIST_LIB)
    Dir.mktmpdir("mosaic-size-histogram-test-") do |dir|
      _, stderr, status = EnvUtil.invoke_ruby([{ "RUBY_GC_LIBRARY" => "mosaic_hist", "MOSAIC_SIZE_HISTOGRAM_OUT" => nil },
                                               "-e", "Dir.chdir(#{dir.dump}); 1000.times { 'x' * 50 }"], "", true, true)
      assert_predicate status, :success?, stderr
      assert_empty Dir.children(dir)
    end
  end
end
