#!/usr/bin/env ruby
# Differential stress test: generated programs (test/diff/generate.rb) run under each GC and
# their stdout must equal default's. A crash, a timeout, a nonzero exit or an "ERR" line is a
# failure too. Failing programs and outputs are saved under build/difftest/seed-N/.
#
#   run.rb [--seeds A..B | --count N --start S] [--duration SECONDS] [--gcs default,mosaic,...]
#          [--timeout SECONDS] [--jobs 2] [--regress] [--no-seeds] [--quiet] [--auto-compact]
#          [--require-reach LIST]
#
# --auto-compact makes every generated program turn GC.auto_compact on first (its first step).
# --regress also runs the regression scripts in test/diff/regress/ (steps only, or whole programs).
# --require-reach LIST: exit 1 unless every mechanism listed was exercised by at least one
# program of the run under each GC but default ("regreys"), or under one GC
# ("mosaic_check_steps:regreys"); names as in the "reach" summary lines (REACH_SUM, REACH_MAX,
# REACH_PROGRAM).
# Environment: MOSAIC_RUBY (the Ruby), MOSAIC_GC_DIR (to find librubygc.mosaic_check.so).
require "fileutils"
require "optparse"
require "rbconfig"
require_relative "generate"

module DiffRun
  ROOT = File.expand_path("../..", __dir__)
  OUT = File.join(ROOT, "build", "difftest")
  REGRESS = File.join(__dir__, "regress")

  Result = Struct.new(:gc, :status, :stdout, :stderr, :secs, :reach)

  # Reach: what each run exercised (prelude.rb's DTReach writes it, one line per process, to
  # the file MOSAIC_DIFFTEST_REACH names; never stdout). Figures from GC.stat, summed over a
  # program's processes (a forked child reports its own since the fork), or their maximum;
  # then what the program counts itself.
  REACH_SUM = %w[incremental_marks steps parallel_marks parallel_steps bg_sweeps compactions regreys race_delays].freeze
  REACH_MAX = %w[regrey_queue_max].freeze
  REACH_PROGRAM = %w[forks lazy_forks bulk_in_mark].freeze
  REACH_KEYS = (REACH_SUM + REACH_MAX + REACH_PROGRAM).freeze

  # One program run's figures from the lines of its reach file: a Hash of key => Integer, or
  # nil for a figure its GC does not have; nil when no process wrote a line (a crash).
  def self.read_reach(path)
    return nil unless File.exist?(path)
    lines = File.readlines(path, chomp: true)
    File.delete(path)
    return nil if lines.empty?
    fig = {}
    lines.each do |l|
      l.split.each do |kv|
        k, v = kv.split("=", 2)
        next unless REACH_KEYS.include?(k)
        next if v == "-"
        v = Integer(v, exception: false) or next
        fig[k] = REACH_MAX.include?(k) ? [fig[k] || 0, v].max : (fig[k] || 0) + v
      end
    end
    REACH_KEYS.to_h { |k| [k, fig[k]] }
  end

  # Per GC label: totals (sums; maxima for REACH_MAX), how many programs exercised each (a
  # figure above 0), how many programs reported at all.
  class ReachTally
    attr_reader :programs

    def initialize
      @total = {}
      @exercised = Hash.new(0)
      @programs = 0
    end

    def add(fig)
      return unless fig
      @programs += 1
      fig.each do |k, v|
        next if v.nil?
        @total[k] = REACH_MAX.include?(k) ? [@total[k] || 0, v].max : (@total[k] || 0) + v
        @exercised[k] += 1 if v > 0
      end
    end

    def exercised(k) = @exercised[k]
    def known?(k) = @total.key?(k)

    def line(label)
      fmt = ->(k, v) { "#{k}=#{known?(k) ? v : 'n/a'}" }
      "reach #{label}: #{REACH_KEYS.map { |k| fmt.call(k, @total[k]) }.join(' ')} " \
        "(programs exercising each, of #{@programs}: #{(REACH_KEYS - REACH_MAX).map { |k| fmt.call(k, @exercised[k]) }.join(' ')})"
    end
  end

  # --require-reach's LIST: [[label or nil, key]]; nil: every GC of the run but default.
  def self.parse_require_reach(list)
    list.split(",").map(&:strip).reject(&:empty?).map do |item|
      label, key = item.include?(":") ? item.split(":", 2) : [nil, item]
      unless REACH_KEYS.include?(key)
        raise OptionParser::InvalidArgument, "unknown mechanism #{key.inspect} (known: #{REACH_KEYS.join(', ')})"
      end
      [label, key]
    end
  end

  # The required mechanisms no program exercised: messages, empty when all were.
  def self.missing_reach(required, tallies, labels)
    miss = []
    required.each do |label, key|
      targets = label ? [label] : labels.reject { |l| l.start_with?("default") }
      targets.each do |l|
        t = tallies[l]
        if t.nil?
          miss << ["#{l}:#{key}", "#{l} did not run (not in --gcs)"]
        elsif t.exercised(key).zero?
          why = t.known?(key) ? "no program of #{t.programs} exercised it" : "#{l} reports no such figure"
          miss << ["#{l}:#{key}", why]
        end
      end
    end
    miss
  end

  def self.ruby = ENV["MOSAIC_RUBY"] || RbConfig.ruby

  def self.default_gcs
    gcs = %w[default mosaic]
    dir = ENV["MOSAIC_GC_DIR"]
    gcs += %w[mosaic_check mosaic_check_steps] if dir && File.exist?(File.join(dir, "librubygc.mosaic_check.so"))
    gcs
  end

  # What each GC name runs: its library and environment. The checking build marks every
  # collection on two threads (mark_workers.c) and has the background sweeper beside every lazy
  # sweep, so both are verified after every GC; "mosaic_check_steps" is the checking build with every major GC the pacer starts (and
  # GC.start(immediate_mark: false)) marking in steps of 64 slots shared by 4 markers, the tri-color invariant
  # checked between steps. The release build keeps its defaults.
  VARIANTS = {
    "mosaic_check" => ["mosaic_check", { "MOSAIC_GC_THREADS" => "2", "MOSAIC_PARALLEL_MARK_MIN" => "0",
                                         "MOSAIC_BACKGROUND_SWEEP_MIN_PAGES" => "0" }],
    # Incremental marking in steps of 64 slots, each shared by 4 markers (16 slots each).
    "mosaic_check_steps" => ["mosaic_check", { "MOSAIC_STRESS_INCREMENTAL" => "64", "MOSAIC_GC_THREADS" => "4",
                                               "MOSAIC_PARALLEL_MARK_MIN" => "0",
                                               "MOSAIC_BACKGROUND_SWEEP_MIN_PAGES" => "0" }],
    # The race gate's (scripts/race-gate.sh): four GC threads, every mark parallel, the
    # background sweeper on, and every hand-over between them and the mutator delayed at
    # random (MOSAIC_STRESS_RACES, up to the environment's value or 50 us).
    "mosaic_check_races" => ["mosaic_check", { "MOSAIC_STRESS_RACES" => ENV.fetch("MOSAIC_STRESS_RACES", "50"),
                                               "MOSAIC_GC_THREADS" => "4", "MOSAIC_PARALLEL_MARK_MIN" => "0",
                                               "MOSAIC_BACKGROUND_SWEEP" => "1", "MOSAIC_BACKGROUND_SWEEP_MIN_PAGES" => "0" }],
    "mosaic_check_steps_races" => ["mosaic_check", { "MOSAIC_STRESS_RACES" => ENV.fetch("MOSAIC_STRESS_RACES", "50"),
                                                     "MOSAIC_STRESS_INCREMENTAL" => "64", "MOSAIC_GC_THREADS" => "4",
                                                     "MOSAIC_PARALLEL_MARK_MIN" => "0", "MOSAIC_BACKGROUND_SWEEP" => "1",
                                                     "MOSAIC_BACKGROUND_SWEEP_MIN_PAGES" => "0" }],
  }.freeze

  # Runs program file under gc with a timeout; kills the whole process group on timeout.
  # reach: the file the program's processes write their reach lines to (read and removed
  # into Result#reach), or nil.
  def self.run_one(file, gc, timeout, label = gc, reach: nil)
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    out_r, out_w = IO.pipe
    err_r, err_w = IO.pipe
    lib, extra = VARIANTS.fetch(gc, [gc, {}])
    env = { "RUBY_GC_LIBRARY" => lib }.merge(extra)
    if reach
      File.delete(reach) if File.exist?(reach)
      env["MOSAIC_DIFFTEST_REACH"] = reach
    end
    pid = Process.spawn(env, ruby, file, out: out_w, err: err_w, in: File::NULL, pgroup: true)
    out_w.close
    err_w.close
    out = +""
    err = +""
    readers = [Thread.new { out << out_r.read }, Thread.new { err << err_r.read }]
    status = nil
    deadline = t0 + timeout
    loop do
      _, st = Process.wait2(pid, Process::WNOHANG)
      if st
        status = st.signaled? ? "signal #{Signal.signame(st.termsig)}" : (st.exitstatus == 0 ? "ok" : "exit #{st.exitstatus}")
        break
      end
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        begin
          Process.kill(:KILL, -pid)
        rescue Errno::ESRCH
        end
        Process.wait(pid)
        status = "timeout #{timeout}s"
        break
      end
      sleep 0.02
    end
    # A forked grandchild could keep the pipes open; don't wait for it forever.
    readers.each { |t| t.join(5) || t.kill }
    [out_r, err_r].each(&:close)
    Result.new(label, status, out, err, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, reach && read_reach(reach))
  end

  # What the reference run is held to. CRuby 3.4.5's default GC breaks in a child forked while
  # another Ractor is alive (SEGV in ractor_cache_set_page at the child's first allocations, or
  # verify_internal_consistency miscounting live slots), so default's report of such a fork is
  # replaced by the language's promise: the child works.
  def self.normalize_ref(out)
    out.gsub(/^fork\(ractors\): .*$/, "fork(ractors): ok").gsub(/^ERR fork child \(ractors alive\): .*\n/, "")
  end

  def self.ref!(r)
    r.stdout = normalize_ref(r.stdout) if r.gc.start_with?("default")
    r
  end

  def self.clean?(r) = r.status == "ok" && !r.stdout.match?(/^ERR /)

  # The reference GC must pass; a failing default run is retried twice (a flaky reference is
  # noted), and a default that never passes is reported like any failure.
  def self.run_ref(file, gc, timeout, label, lock, opts)
    r = run_one(file, gc, timeout, label, reach: gc == "default" ? nil : "#{file.delete_suffix('.rb')}.#{label.tr('#', '_')}.reach")
    return r unless gc == "default"
    2.times do |i|
      break if clean?(ref!(r))
      lock.synchronize { puts "note  #{File.basename(file, '.rb')}: default failed (#{r.status}#{r.stdout[/^ERR .*/] && ', ' + r.stdout[/^ERR .*/]}), retrying" } unless opts[:quiet]
      r = run_one(file, gc, timeout, label)
    end
    ref!(r)
  end

  # Compares every GC's result with default's; returns a list of problem strings.
  def self.judge(results)
    base = results.first
    probs = []
    results.each do |r|
      if r.status != "ok"
        probs << "#{r.gc}: #{r.status}"
      elsif r.stdout.include?("\nERR ") || r.stdout.start_with?("ERR ")
        line = r.stdout.lines.find { |l| l.start_with?("ERR ") }
        probs << "#{r.gc}: #{line.strip}"
      elsif r != base && r.stdout != base.stdout && base.status == "ok"
        a = base.stdout.lines
        b = r.stdout.lines
        i = (0...[a.size, b.size].max).find { |j| a[j] != b[j] }
        probs << "#{r.gc}: stdout differs at line #{i + 1}: default #{(a[i] || '<eof>').strip.inspect}, #{r.gc} #{(b[i] || '<eof>').strip.inspect}"
      end
    end
    probs
  end

  # The interesting part of stderr: for a [BUG] report its first lines and the Ruby and C
  # backtraces' first frames, else the last lines.
  def self.stderr_tail(r, n = 8)
    lines = r.stderr.lines.map(&:rstrip).reject(&:empty?)
    if (i = lines.index { |l| l.include?("[BUG]") })
      pick = lines[[i - 3, 0].max..i]
      j = lines.index { |l| l.start_with?("-- Ruby level backtrace") }
      pick += lines[(j + 1)..(j + 3)] if j
      k = lines.index { |l| l.start_with?("-- C level backtrace") }
      pick += lines[(k + 1)..(k + 8)].map { |l| l.sub(/^\S+\((\w+)/, '\1').sub(%r{ \[0x\h+\]}, "") } if k
      lines = pick.compact
    else
      lines = lines.last(n)
    end
    lines.map { |l| "    | #{l[0, 200]}" }.join("\n")
  end

  def self.save(name, program, results)
    dir = File.join(OUT, name)
    FileUtils.mkdir_p(dir)
    File.write(File.join(dir, "program.rb"), program)
    results.each do |r|
      File.write(File.join(dir, "#{r.gc}.out"), r.stdout)
      File.write(File.join(dir, "#{r.gc}.err"), r.stderr)
    end
    dir
  end

  # Wraps a steps-only regression script into a whole program.
  def self.regress_program(path)
    src = File.read(path)
    return src if src.lines.any? { |l| l.chomp == "#@@ steps" }
    "# #{File.basename(path)}\n" + File.read(DiffGen::PRELUDE) + "\n#@@ steps\n" + src + "\n#@@ end\nS.finish\n"
  end

  def self.main(argv)
    opts = { gcs: nil, timeout: 120, jobs: 2, duration: nil, seeds: nil, count: nil, start: 1,
             regress: false, no_seeds: false, quiet: false, auto_compact: false, require_reach: [] }
    parser = OptionParser.new do |o|
      o.on("--seeds A..B") { |v| a, b = v.split("..").map { |x| Integer(x) }; opts[:seeds] = (a..(b || a)) }
      o.on("--count N", Integer) { |v| opts[:count] = v }
      o.on("--start S", Integer) { |v| opts[:start] = v }
      o.on("--duration SECONDS", Float) { |v| opts[:duration] = v }
      o.on("--gcs LIST") { |v| opts[:gcs] = v.split(",") }
      o.on("--timeout SECONDS", Float) { |v| opts[:timeout] = v }
      o.on("--jobs N", Integer) { |v| opts[:jobs] = v }
      o.on("--regress") { opts[:regress] = true }
      o.on("--no-seeds") { opts[:no_seeds] = true }
      o.on("--quiet") { opts[:quiet] = true }
      o.on("--auto-compact") { opts[:auto_compact] = true }
      o.on("--require-reach LIST") { |v| opts[:require_reach] += parse_require_reach(v) }
    end
    begin
      parser.parse!(argv)
    rescue OptionParser::ParseError => ex
      warn "run.rb: #{ex.message}"
      return 2
    end
    gcs = opts[:gcs] || default_gcs
    gcs = ["default"] + gcs unless gcs.first == "default"   # the reference, first
    labels = gcs.each_with_index.map { |g, i| n = gcs[0...i].count(g); n.zero? ? g : "#{g}##{n + 1}" }
    seeds =
      if opts[:seeds] then opts[:seeds].to_a
      elsif opts[:count] then (opts[:start]...(opts[:start] + opts[:count])).to_a
      elsif opts[:duration] then nil
      else (opts[:start]...(opts[:start] + 20)).to_a
      end
    seeds = [] if opts[:no_seeds]

    jobs = []
    if opts[:regress]
      Dir[File.join(REGRESS, "*.rb")].sort.each { |f| jobs << [File.basename(f, ".rb"), -> { regress_program(f) }] }
    end
    t_start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    deadline = opts[:duration] && t_start + opts[:duration]
    queue = Queue.new
    jobs.each { |j| queue << j }
    seed_i = 0
    lock = Mutex.new
    failures = []
    tallies = labels.reject { |l| l.start_with?("default") }.to_h { |l| [l, ReachTally.new] }
    ran_seeds = 0
    programs = 0
    $stdout.sync = true
    puts "difftest: GCs #{gcs.join(',')}, ruby #{ruby}, #{opts[:jobs]} jobs#{opts[:auto_compact] ? ', GC.auto_compact on' : ''}" unless opts[:quiet]

    next_job = lambda do
      lock.synchronize do
        next queue.pop(true) unless queue.empty?
        next nil if deadline && Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        s = seeds.is_a?(Array) ? seeds[seed_i] : opts[:start] + seed_i
        seed_i += 1
        s && ["seed-#{s}", -> { DiffGen.program(s, auto_compact: opts[:auto_compact]) }, s]
      end
    end

    workers = Array.new(opts[:jobs]) do
      Thread.new do
        while (job = next_job.call)
          name, make, seed = job
          program = make.call
          file = File.join(OUT, "work", "#{name}.rb")
          FileUtils.mkdir_p(File.dirname(file))
          File.write(file, program)
          results = gcs.zip(labels).map { |gc, label| run_ref(file, gc, opts[:timeout], label, lock, opts) }
          probs = judge(results)
          lock.synchronize do
            programs += results.size
            results.each { |r| tallies[r.gc]&.add(r.reach) }
            ran_seeds += 1 if seed
            if probs.empty?
              File.delete(file)
              puts "ok    #{name} (#{results.map { |r| format('%s %.1fs', r.gc, r.secs) }.join(', ')})" unless opts[:quiet]
            else
              dir = save(name, program, results)
              failures << name
              puts "FAIL  #{name}: #{probs.join('; ')} (saved in #{dir.sub(ROOT + '/', '')})"
              results.each { |r| puts "  #{r.gc} stderr:\n#{stderr_tail(r)}" if r.status != "ok" && !r.stderr.strip.empty? }
            end
          end
        end
      end
    end
    workers.each(&:join)
    secs = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t_start
    seeds_failed = failures.grep(/\Aseed-/).map { |f| f.sub("seed-", "") }
    others = failures.grep_v(/\Aseed-/)
    detail = []
    detail << "seeds: #{seeds_failed.join(', ')}" unless seeds_failed.empty?
    detail << "regress: #{others.join(', ')}" unless others.empty?
    tallies.each { |l, t| puts t.line(l) }
    missing = missing_reach(opts[:require_reach], tallies, labels)
    missing.each { |what, why| puts "reach missing: #{what}: #{why}" }
    detail << "reach missing: #{missing.map(&:first).join(', ')}" unless missing.empty?
    puts format("difftest: %d seeds, %d programs run, %d failures%s (%.0fs)", ran_seeds, programs, failures.size,
                detail.empty? ? "" : " (#{detail.join('; ')})", secs)
    failures.empty? && missing.empty? ? 0 : 1
  end
end

exit DiffRun.main(ARGV) if $0 == __FILE__
