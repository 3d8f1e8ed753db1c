require_relative "helper"
require "fileutils"
require "open3"
require "rbconfig"
require "tmpdir"

# The tools operators run on production GCs, used as a new user would: installed from the
# gem registry into this test run's own GEM_HOME (build/test-gems, reused while present).
# gc_tracer calls GC.stat and GC.latest_gc_info from GC event hooks, inside a collection;
# StackProf reads GC.latest_gc_info(:state) from its sampling handler; autotuner reads
# GC.stat, GC.stat_heap and GC.latest_gc_info around each request. (Review bug 9: gc_tracer
# stopped Mosaic with "[BUG] object allocation during garbage collection".)
# Skips, saying why, only when the registry cannot be reached.
class TestMosaicTools < Test::Unit::TestCase
  include MosaicTestHelper

  GEMS = %w[gc_tracer stackprof autotuner].freeze
  GEM_HOME = File.expand_path("../build/test-gems/#{RUBY_VERSION}", __dir__)
  UNREACHABLE = /Errno::ECONNREFUSED|Errno::ENETUNREACH|Errno::EHOSTUNREACH|SocketError|getaddrinfo|Unable to download data|timed out|Could not find a valid gem .* \(>= 0\) in any repository/

  def self.gems_ready
    @gems_ready ||= begin
      missing = GEMS.reject { |g| Dir.exist?(File.join(GEM_HOME, "gems")) && !Dir.glob(File.join(GEM_HOME, "gems", "#{g}-*")).empty? }
      if missing.empty?
        [:ok]
      else
        FileUtils.mkdir_p(GEM_HOME)
        # Installed with the default GC and no sanitizer runtime preloaded (the sanitizer gates'
        # LD_PRELOAD): the gems' build is not what is under test. Under libtsan, the extension
        # build's make crashed (Segmentation fault), leaving the gems installed without their
        # extensions, and every later run failed to load them.
        env = { "GEM_HOME" => GEM_HOME, "GEM_PATH" => GEM_HOME, "RUBY_GC_LIBRARY" => "default", "LD_PRELOAD" => nil }
        out, status = Open3.capture2e(env, RbConfig.ruby, "-S", "gem", "install", "--no-document", *missing)
        if status.success? then [:ok]
        elsif out.match?(UNREACHABLE) then [:unreachable, out.lines.last(3).join]
        else [:failed, out]
        end
      end
    end
  end

  def setup
    state, detail = self.class.gems_ready
    omit "the gem registry is unreachable, so #{GEMS.join(', ')} cannot be installed: #{detail}" if state == :unreachable
    flunk "gem install #{GEMS.join(' ')} failed:\n#{detail}" if state == :failed
  end

  def assert_tool_script(code, timeout: 120)
    # assert_separately disables RubyGems; these scripts need it.
    assert_gc_script(code, timeout: timeout, env: { "GEM_HOME" => GEM_HOME, "GEM_PATH" => GEM_HOME },
                     args: ["--enable=gems"])
  end

  def test_gc_tracer_logs_every_gc_event
    log = File.join(Dir.mktmpdir("mosaic-gc-tracer"), "log.txt")
    assert_tool_script(<<~RUBY)
      require "gc_tracer"
      c = GC.count
      GC::Tracer.start_logging(#{log.dump}) do
        300_000.times { "x" * 10 }
        GC.start
        GC.start(full_mark: false)
      end
      gcs = GC.count - c
      lines = File.readlines(#{log.dump}).map { |l| l.split("\\t") }
      header = lines.shift
      assert_include header, "count"
      assert_include header, "major_by"
      events = lines.map(&:first)
      assert_operator gcs, :>=, 3
      %w[start end_mark end_sweep].each do |ev|
        assert_operator events.count(ev), :>=, gcs, "#{'#{ev}'} lines for #{'#{gcs}'} GCs"
      end
      # Each row carries GC.stat's count as the GC saw it.
      counts = lines.select { |l| l.first == "start" }.map { |l| Integer(l[header.index("count")]) }
      assert_equal counts.sort, counts
    RUBY
  end

  # GC.latest_gc_info(:state) inside the GC's event hooks is the default GC's: :none at
  # GC_START, :marking at GC_END_MARK, :sweeping at GC_END_SWEEP (gc_tracer logs it with each
  # event). Mosaic used to answer :none at the last two.
  def test_gc_tracer_state_at_each_event
    Dir.mktmpdir("mosaic-gc-tracer") { |dir| gc_tracer_state_at_each_event(File.join(dir, "log.txt")) }
  end

  def gc_tracer_state_at_each_event(log)
    assert_tool_script(<<~RUBY)
      require "gc_tracer"
      GC.start
      GC::Tracer.start_logging(#{log.dump}, events: %i[start end_mark end_sweep], gc_stat: false,
                               gc_latest_gc_info: true, rusage: false) do
        a = []
        300_000.times { a << "x" * 10; a = [] if a.size > 50_000 }
        GC.start
        GC.start(full_mark: false)
      end
      lines = File.readlines(#{log.dump}).map { |l| l.chomp.split("\t") }
      header = lines.shift
      type, state = header.index("type"), header.index("state")
      by_event = lines.group_by { |l| l[type] }.transform_values { |ls| ls.map { |l| l[state] }.uniq }
      assert_equal({ "start" => ["none"], "end_mark" => ["marking"], "end_sweep" => ["sweeping"] }, by_event)
    RUBY
  end

  def test_stackprof_raw_samples_during_gc_heavy_work
    assert_tool_script(<<~'RUBY')
      require "stackprof"
      result = StackProf.run(mode: :wall, raw: true, interval: 100) do
        rounds(200).times { Array.new(20_000) { |i| [i] }; GC.start(full_mark: false) }
      end
      assert_operator result[:samples], :>, 0
      assert_kind_of Array, result[:raw]
      assert_operator result[:gc_samples], :>, 0, "samples taken inside GC"
      gc_frames = result[:frames].values.map { |f| f[:name] }.grep(/\A\((marking|sweeping|garbage collection)\)\z/)
      assert_not_empty gc_frames
    RUBY
  end

  def test_autotuner_request_hook_reports
    assert_tool_script(<<~'RUBY')
      require "autotuner"
      reports, metrics = [], []
      Autotuner.enabled = true
      Autotuner.reporter = proc { |r| reports << r }
      Autotuner.metrics_reporter = proc { |m| metrics << m }
      app = ->(env) { Array.new(5_000) { |i| "r#{i}" }; [200, {}, ["ok"]] }
      plugin = Autotuner::RackPlugin.new(app)
      requests = rounds(300)
      requests.times { assert_equal 200, plugin.call({}).first }
      assert_equal requests, metrics.size
      assert_operator metrics.sum { |m| m["diff.minor_gc_count"] + m["diff.major_gc_count"] }, :>, 0
      assert metrics.all? { |m| m["heap_pages"].is_a?(Integer) && m["heap_pages"] > 0 }
      reports.each { |r| assert_kind_of String, r.to_s }
    RUBY
  end
end
