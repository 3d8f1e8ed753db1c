require_relative "helper"

# docs/STATS.md documents Mosaic's own keys (mosaic_*) of GC.stat, GC.stat_heap,
# GC.latest_gc_info and GC.latest_compact_info, one table row each: the keys each method
# returns in a running Ruby must be exactly those its section documents. A key added to the
# code without a row, or a row left for a key the code no longer returns, fails with its name.
class TestMosaicStatsDoc < Test::Unit::TestCase
  include MosaicTestHelper

  DOC = File.expand_path("../docs/STATS.md", __dir__)
  METHODS = %w[GC.stat GC.stat_heap GC.latest_gc_info GC.latest_compact_info].freeze
  # The subsection of GC.latest_compact_info's that documents each class's Hash in :mosaic_classes.
  PER_CLASS = "Per class in `mosaic_classes`"
  KINDS = ["total", "now", "latest GC", "peak", "average", "setting", "latest compaction"].freeze

  Row = Struct.new(:method, :section, :keys, :unit, :kind, :what, :line)

  # Every table row of docs/STATS.md under a "## `GC.method`" heading.
  def rows
    @rows ||= begin
      rows = []
      method = section = nil
      File.foreach(DOC, encoding: "UTF-8").with_index(1) do |line, n|
        case line
        when /\A## `(GC\.\w+)`\s*\z/ then method, section = $1, nil
        when /\A## / then method = section = nil
        when /\A### (.*?)\s*\z/ then section = $1
        when /\A\|/
          next unless method
          cells = line.strip.delete_prefix("|").delete_suffix("|").split("|", -1).map(&:strip)
          next if cells.first == "key" || cells.all? { _1.match?(/\A-+\z/) }
          rows << Row.new(method, section, cells[0].scan(/`(\w+)`/).flatten, cells[1], cells[2], cells[3], n)
        end
      end
      rows
    end
  end

  # method => the mosaic_* keys its section's tables document (per-class keys apart).
  def documented
    METHODS.to_h do |m|
      [m, rows.select { _1.method == m && _1.section != PER_CLASS }.flat_map(&:keys).select { _1.start_with?("mosaic_") }.sort]
    end
  end

  def documented_per_class
    rows.select { _1.method == "GC.latest_compact_info" && _1.section == PER_CLASS }.flat_map(&:keys).sort
  end

  # The file's own shape, whatever the GC: a section per method, and every row complete.
  def test_every_row_names_its_keys_unit_kind_and_meaning
    headings = File.read(DOC, encoding: "UTF-8").scan(/^## `(GC\.\w+)`$/).flatten
    assert_equal METHODS, headings, "docs/STATS.md must have one section per method, in this order"
    assert_not_empty documented["GC.stat"]
    assert_not_empty documented_per_class, "docs/STATS.md has no table under \"### #{PER_CLASS}\""
    problems = []
    rows.each do |r|
      at = "docs/STATS.md:#{r.line}"
      problems << "#{at}: no `key` in the first cell" if r.keys.empty?
      problems << "#{at}: 4 cells expected (key, unit, kind, what it counts)" if [r.unit, r.kind, r.what].any? { _1.nil? || _1.empty? }
      next unless r.kind
      r.kind.split(/,\s*/).each { |k| problems << "#{at}: kind #{k.inspect} is none of #{KINDS.join(", ")}" unless KINDS.include?(k) }
    end
    all = rows.flat_map { |r| r.keys.map { [r.method, r.section == PER_CLASS, _1] } }
    all.tally.each { |(m, _, k), n| problems << "#{m}: #{k} has #{n} rows" if n > 1 }
    assert_empty problems
  end

  def test_documented_keys_are_the_keys_returned
    omit "Mosaic's own keys" unless mosaic?
    assert_gc_script(<<~RUBY)
      documented = #{documented.inspect}
      documented_per_class = #{documented_per_class.inspect}

      def check(name, returned, documented)
        returned = returned.map(&:to_s).uniq.sort
        extra = returned - documented
        missing = documented - returned
        assert_empty extra, "\#{name} returns keys docs/STATS.md does not document: \#{extra.join(", ")}"
        assert_empty missing, "docs/STATS.md documents keys \#{name} does not return: \#{missing.join(", ")}"
      end
      mosaic = ->(keys) { keys.select { _1.to_s.start_with?("mosaic_") } }

      # Before any compaction latest_compact_info has none of Mosaic's keys (the doc says so).
      if GC.stat(:compact_count) == 0
        check("GC.latest_compact_info before a compaction", mosaic[GC.latest_compact_info.keys], [])
      end

      GC.start
      stat = GC.stat
      check("GC.stat", mosaic[stat.keys], documented["GC.stat"])
      # Each also answers alone (the memory breakdown's keys are measured then).
      documented["GC.stat"].each { |k| assert_kind_of Integer, GC.stat(k.to_sym), k }
      check("GC.stat_heap(0)", mosaic[GC.stat_heap(0).keys], documented["GC.stat_heap"])
      check("GC.stat_heap", mosaic[GC.stat_heap.values.flat_map(&:keys)], documented["GC.stat_heap"])
      check("GC.latest_gc_info", mosaic[GC.latest_gc_info.keys], documented["GC.latest_gc_info"])

      GC.compact
      info = GC.latest_compact_info
      check("GC.latest_compact_info", mosaic[info.keys], documented["GC.latest_compact_info"])
      assert_not_empty info[:mosaic_classes]
      check("GC.latest_compact_info[:mosaic_classes][slot_size]", info[:mosaic_classes].values.flat_map(&:keys), documented_per_class)
    RUBY
  end
end
