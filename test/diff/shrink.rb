#!/usr/bin/env ruby
# Shrinks a failing difftest program to a small one that still fails the same way.
#
#   shrink.rb SEED GC [--file PROGRAM.rb] [--any] [--timeout SECONDS] [--no-params] [--auto-compact]
#
# "Fails" means: under default the program exits 0 with no ERR line, and under GC it crashes,
# times out, exits nonzero, prints an ERR line or prints other bytes than default. By default a
# candidate must fail the same way as the original (same kind; for ERR lines the same message
# with numbers blanked); --any keeps any failure. Delta debugging (ddmin) removes steps, then
# single steps, then shrinks numeric arguments. Prints the minimized steps as a regression
# script (save it as test/diff/regress/NAME.rb; run.rb --regress runs those) and writes the
# whole program to build/difftest/shrunk-SEED-GC.rb. --auto-compact regenerates the seed as
# run.rb --auto-compact does (or pass the saved program with --file).
require "fileutils"
require "optparse"
require_relative "generate"
require_relative "run"

module DiffShrink
  def self.split(program)
    lines = program.lines(chomp: true)
    a = lines.index("#@@ steps") or abort "no '#@@ steps' marker"
    b = lines.index("#@@ end") or abort "no '#@@ end' marker"
    [lines[0..a], lines[(a + 1)...b].reject { |l| l.strip.empty? }, lines[b..]]
  end

  def self.signature(res, base)
    return nil unless DiffRun.clean?(base)
    return "crash" if res.status.start_with?("signal") || res.status.start_with?("exit")
    return "timeout" if res.status.start_with?("timeout")
    if (l = res.stdout.lines.find { |x| x.start_with?("ERR ") })
      return "ERR " + l.strip.sub(/\AERR /, "").gsub(/\d+/, "N").gsub(/\(t=N\)/, "")
    end
    return "differs" if res.stdout != base.stdout
    nil
  end

  class Shrinker
    attr_reader :tests

    def initialize(head, tail, gc, timeout, want, log)
      @head = head
      @tail = tail
      @gc = gc
      @timeout = timeout
      @want = want
      @log = log
      @tests = 0
      @cache = {}
      @dir = File.join(DiffRun::OUT, "shrink-work")
      FileUtils.mkdir_p(@dir)
    end

    def program(steps) = (@head + steps + @tail).join("\n") + "\n"

    # Runs default and the GC side by side; returns the failure signature or nil.
    def run(steps)
      key = steps.join("\n")
      return @cache[key] if @cache.key?(key)
      @tests += 1
      file = File.join(@dir, "cand-#{Process.pid}.rb")
      File.write(file, program(steps))
      base = nil
      res = nil
      t = Thread.new { base = DiffRun.run_one(file, "default", @timeout) }
      res = DiffRun.run_one(file, @gc, @timeout)
      t.join
      2.times { base = DiffRun.run_one(file, "default", @timeout) unless DiffRun.clean?(DiffRun.ref!(base)) }
      DiffRun.ref!(base)
      sig = DiffShrink.signature(res, base)
      @cache[key] = sig
    end

    def fails?(steps)
      sig = run(steps)
      ok = sig && (@want.nil? || sig == @want)
      @log.call("  #{steps.size} steps: #{ok ? 'fails' : 'passes'}#{sig && !ok ? " (other failure: #{sig[0, 80]})" : ''}")
      ok
    end

    def ddmin(steps)
      n = 2
      while steps.size >= 2
        chunk = (steps.size / n.to_f).ceil
        parts = steps.each_slice(chunk).to_a
        reduced = false
        parts.each_with_index do |_, i|
          comp = parts.each_with_index.reject { |_, j| j == i }.flat_map(&:first)
          next if comp.empty?
          if fails?(comp)
            steps = comp
            n = [n - 1, 2].max
            reduced = true
            break
          end
        end
        unless reduced
          parts.each do |part|
            next if part.size == steps.size
            if part.size < steps.size / 2 && fails?(part)
              steps = part
              n = 2
              reduced = true
              break
            end
          end
        end
        next if reduced
        break if n >= steps.size
        n = [n * 2, steps.size].min
      end
      steps
    end

    def one_by_one(steps)
      i = steps.size - 1
      while i >= 0
        cand = steps[0...i] + steps[(i + 1)..]
        steps = cand if !cand.empty? && fails?(cand)
        i -= 1
      end
      steps
    end

    # Smaller sizes and counts: integer literals below 100000 (seeds are larger).
    def params(steps)
      steps.each_index do |i|
        loop do
          line = steps[i]
          nums = line.to_enum(:scan, /(?<![\w.])\d+(?![\w.])/).map { Regexp.last_match }
          changed = false
          nums.each do |m|
            v = m[0].to_i
            next if v < 2 || v >= 100_000
            [1, v / 10, v / 3].uniq.select { |c| c >= 1 && c < v }.each do |c|
              cand_line = line[0...m.begin(0)] + c.to_s + line[m.end(0)..]
              cand = steps.dup
              cand[i] = cand_line
              if fails?(cand)
                steps = cand
                changed = true
                break
              end
            end
            break if changed
          end
          break unless changed
        end
      end
      steps
    end
  end

  def self.main(argv)
    opts = { file: nil, any: false, timeout: 120, params: true, auto_compact: false }
    OptionParser.new do |o|
      o.on("--file PATH") { |v| opts[:file] = v }
      o.on("--any") { opts[:any] = true }
      o.on("--timeout SECONDS", Float) { |v| opts[:timeout] = v }
      o.on("--no-params") { opts[:params] = false }
      o.on("--auto-compact") { opts[:auto_compact] = true }
    end.parse!(argv)
    seed = argv[0] or abort "usage: shrink.rb SEED GC [--file PROGRAM.rb] [--any]"
    gc = argv[1] || "mosaic"
    program = opts[:file] ? File.read(opts[:file]) : DiffGen.program(Integer(seed), auto_compact: opts[:auto_compact])
    head, steps, tail = split(program)
    log = ->(m) { $stderr.puts m }
    probe = Shrinker.new(head, tail, gc, opts[:timeout], nil, log)
    sig = nil
    3.times do
      sig = probe.run(steps)
      break if sig
      probe.instance_variable_get(:@cache).clear
    end
    abort "seed #{seed}: does not fail under #{gc} (tried 3 times)" unless sig
    log.call("seed #{seed} under #{gc}: #{sig}; #{steps.size} steps")
    sh = Shrinker.new(head, tail, gc, opts[:timeout], opts[:any] ? nil : sig, log)
    steps = sh.ddmin(steps)
    steps = sh.one_by_one(steps)
    steps = sh.params(steps) if opts[:params]
    steps = sh.one_by_one(steps) if opts[:params]
    full = File.join(DiffRun::OUT, "shrunk-#{seed}-#{gc}.rb")
    FileUtils.mkdir_p(DiffRun::OUT)
    File.write(full, sh.program(steps))
    log.call("#{sh.tests} test runs; whole program in #{full}")
    puts "# difftest regression: seed #{seed}, #{gc}: #{sig}"
    puts "# Steps only; run.rb --regress runs it after test/diff/prelude.rb and compares with default."
    puts steps
    0
  end
end

exit DiffShrink.main(ARGV) if $0 == __FILE__
