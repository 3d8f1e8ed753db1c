# Workload "sidekiq-jobs": a real job-processing server, end to end. A private redis-server
# (127.0.0.1, a free port, no persistence: --save "" --appendonly no, its own temporary directory)
# and a Sidekiq process (`sidekiq -c 5`, the jobs of sidekiq_app/jobs.rb) run in their own process
# groups, under this Ruby and this RUBY_GC_LIBRARY (inherited). This process enqueues a fixed
# number of jobs (Sidekiq::Client, keeping at most WINDOW of them unfinished, so that the queue
# never runs dry and a job's latency is its wait plus its work, not the length of a backlog) and
# a collector thread takes each finished job's id from the done list (BLPOP). Each job builds an
# order from its arguments (hashes, strings, arrays), round-trips it through JSON, sorts and
# formats it, and writes its SHA-256 with its GC and pid under its job id. Afterwards every
# result is read back and compared with the digest this process computes itself, and every
# result must name this process's GC and the Sidekiq process's pid. A StatsJob before and after
# the load gives the Sidekiq process's GC and GC counts; its peak RSS is VmHWM from
# /proc/PID/status. Then SIGTERM: Sidekiq must exit 0 within 30 s (its shutdown timeout is 10 s).
# Fails (non-zero, one clear message) on a missing or wrong result, a job's error, a crash, a
# stall (no job finished for 60 s) or a wrong GC.
# Figures: jobs/s, latency p50/p99/max (ms, from just before the enqueue to the collector's pop),
# the Sidekiq process's peak RSS (kB) and GC count during the jobs, and the seconds from SIGTERM
# to its exit.
# Usage: ruby bench/workloads/sidekiq_jobs.rb [--quick] [--jobs N]   (full 20000, quick 1000)
require_relative "../lib/bench_support"
require "socket"
require "json"
require "tmpdir"
require "fileutils"

REDIS_SERVER = ENV["PATH"].split(File::PATH_SEPARATOR).map { |d| File.join(d, "redis-server") }
                          .find { |f| File.executable?(f) }
Bench.skip("redis-server is not installed (bench/setup.sh installs Debian's redis-server)") unless REDIS_SERVER
Bench.skip("no /proc/PID/status on this system") unless File.readable?("/proc/self/status")
# connection_pool below 3: Sidekiq 7.3.9's scheduler calls TimedStack#pop with a positional
# timeout, which connection_pool 3 refuses (the scheduler thread dies, and Sidekiq exits 1 on TERM).
GEMS = [["connection_pool", "< 3"], "sidekiq"].freeze
Bench.use_gems(*GEMS)
require_relative "sidekiq_app/jobs"

JOBS = ARGV.include?("--jobs") ? Integer(ARGV[ARGV.index("--jobs") + 1]) : Bench.size(20_000, 1000)
CONCURRENCY = 5
WINDOW = 4 * CONCURRENCY
GC_NAME = GC.config[:implementation].to_s
JOBS_FILE = File.join(__dir__, "sidekiq_app", "jobs.rb")
BOOT_TIMEOUT = 120
STALL_TIMEOUT = 60
STOP_TIMEOUT = 30

def fail!(msg)
  warn "sidekiq-jobs: FAILED: #{msg}"
  [["Sidekiq", @sidekiq_log, 20], ["redis-server", @redis_log, 5]].each do |name, log, lines|
    next unless log && File.exist?(log) && !File.zero?(log)
    warn "sidekiq-jobs: last lines of the #{name} log:"
    warn File.readlines(log).last(lines).join
  end
  stop(:sidekiq, kill: true)
  stop(:redis, kill: true)
  FileUtils.rm_rf(@tmp) if @tmp
  exit! 1 # at once: the collector thread may be blocked in BLPOP
end

# Stops a server (its process group): TERM (or KILL), then waits up to STOP_TIMEOUT, then KILLs
# the group. Returns its Process::Status, or :timeout.
def stop(which, kill: false)
  pid = instance_variable_get("@#{which}")
  return unless pid
  status = instance_variable_get("@#{which}_status")
  return status if status
  Process.kill(kill ? :KILL : :TERM, pid)
  deadline = Bench.now + STOP_TIMEOUT
  result = nil
  until (r = Process.wait2(pid, Process::WNOHANG))
    if Bench.now > deadline
      result = :timeout
      Process.kill(:KILL, -pid)
      r = Process.wait2(pid)
      break
    end
    sleep 0.02
  end
  instance_variable_set("@#{which}_status", r.last)
  result || r.last
rescue Errno::ESRCH, Errno::ECHILD
  nil
ensure
  begin
    Process.kill(:KILL, -pid) if pid # whatever is left of its group
  rescue Errno::ESRCH, Errno::EPERM
    nil
  end
end

def alive!(which, name)
  pid = instance_variable_get("@#{which}")
  return unless (r = Process.wait2(pid, Process::WNOHANG))
  instance_variable_set("@#{which}_status", r.last)
  fail!("#{name} exited (#{r.last.inspect})")
end

def vm_hwm(pid) = File.read("/proc/#{pid}/status")[/^VmHWM:\s+(\d+) kB/, 1].to_i

# A free port: the kernel picks one, and redis-server binds it right after.
port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
url = "redis://127.0.0.1:#{port}/0"
tmp = @tmp = Dir.mktmpdir("mosaic-bench-sidekiq-")
at_exit { FileUtils.rm_rf(tmp) }
@redis_log = File.join(tmp, "redis.log")
@sidekiq_log = File.join(tmp, "sidekiq.log")
at_exit { stop(:sidekiq, kill: true); stop(:redis, kill: true) } # no server is left

# Redis: private, in memory only.
@redis = Process.spawn(REDIS_SERVER, "--port", port.to_s, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                       "--dir", tmp, "--daemonize", "no", in: File::NULL, out: @redis_log, err: @redis_log, pgroup: true)
redis = RedisClient.new(url: url, timeout: 5)
deadline = Bench.now + 20
begin
  redis.call("PING")
rescue RedisClient::CannotConnectError
  alive!(:redis, "redis-server")
  fail!("redis-server did not answer within 20 s") if Bench.now > deadline
  sleep 0.05
  retry
end
redis_version = redis.call("INFO", "server")[/^redis_version:(\S+)/, 1]

# Sidekiq: a separate process, as in production (bin/sidekiq's steps).
launch = <<~RUBY
  Gem.use_paths(#{Bench::GEM_DIR.dump}, [#{Bench::GEM_DIR.dump}])
  #{GEMS.map { |g| "gem #{Array(g).map(&:dump).join(", ")}" }.join("; ")}
  require "sidekiq/cli"
  begin
    cli = Sidekiq::CLI.instance
    cli.parse(["-r", #{JOBS_FILE.dump}, "-c", "#{CONCURRENCY}", "-q", #{SidekiqBench::QUEUE.dump}, "-t", "10", "-e", "production"])
    cli.run
  rescue => e
    warn e.message, *e.backtrace
    exit 1
  end
RUBY
env = { "REDIS_URL" => url, "MOSAIC_BENCH_FIGURES" => nil }
@sidekiq = Process.spawn(env, RbConfig.ruby, "-e", launch, in: File::NULL, out: @sidekiq_log, err: @sidekiq_log, pgroup: true)
Sidekiq.configure_client do |c|
  c.redis = { url: url, size: 2 }
  c.logger.level = Logger::WARN
end

# Runs a StatsJob and waits for its answer (also the boot check: Sidekiq is processing jobs).
stats = lambda do |token, timeout|
  SidekiqBench::StatsJob.perform_async(token)
  deadline = Bench.now + timeout
  until (json = redis.call("GET", SidekiqBench.stats_key(token)))
    alive!(:sidekiq, "the Sidekiq process")
    fail!("the Sidekiq process did not run the #{token} StatsJob within #{timeout} s") if Bench.now > deadline
    sleep 0.02
  end
  info = JSON.parse(json)
  fail!("the Sidekiq process runs GC #{info["gc"]}, expected #{GC_NAME}") unless info["gc"] == GC_NAME
  fail!("the #{token} StatsJob ran in pid #{info["pid"]}, not the Sidekiq process #{@sidekiq}") unless info["pid"] == @sidekiq
  info
end
before = stats.("before", BOOT_TIMEOUT)

# The load: this thread enqueues, the collector pops finished job ids; WINDOW tokens bound the
# number of unfinished jobs.
seeds = Array.new(JOBS) { |i| (i * 7919 + 17) % 1_000_003 }
jids = Array.new(JOBS)
index = {}
enqueued_at = Array.new(JOBS)
latencies = []
tokens = Thread::Queue.new
WINDOW.times { tokens << true }
done = 0
lock = Mutex.new
collector_error = nil
collector = Thread.new do
  popper = RedisClient.new(url: url, timeout: 5)
  while done < JOBS
    _list, jid = popper.blocking_call(3, "BLPOP", SidekiqBench::DONE, 1)
    next unless jid
    t = Bench.now
    lock.synchronize do
      i = index.fetch(jid) { raise "unknown job id #{jid} on the done list" }
      latencies << t - enqueued_at[i]
      done += 1
    end
    tokens << true
  end
rescue StandardError => e
  collector_error = "collector: #{e.class}: #{e.message}"
  tokens << true
end
total = Bench.time do
  JOBS.times do |i|
    until tokens.pop(timeout: STALL_TIMEOUT)
      alive!(:sidekiq, "the Sidekiq process")
      fail!("no job finished within #{STALL_TIMEOUT} s (#{done} of #{JOBS} done)")
    end
    fail!(collector_error) if collector_error
    lock.synchronize do
      enqueued_at[i] = Bench.now
      jid = SidekiqBench::OrderJob.perform_async(i, seeds[i])
      jids[i] = jid
      index[jid] = i
    end
  end
  unless collector.join(STALL_TIMEOUT)
    alive!(:sidekiq, "the Sidekiq process")
    fail!("the last jobs did not finish within #{STALL_TIMEOUT} s (#{done} of #{JOBS} done)")
  end
end
fail!(collector_error) if collector_error
alive!(:sidekiq, "the Sidekiq process")

# Every result, checked against this process's own computation.
wrong = []
jids.each_slice(500).with_index do |slice, b|
  redis.call("MGET", *slice.map { |j| SidekiqBench.result_key(j) }).each_with_index do |value, k|
    i = b * 500 + k
    expected = "#{SidekiqBench.compute(i, seeds[i])} #{GC_NAME} #{@sidekiq}"
    wrong << "job #{i} (#{slice[k]}): #{value ? "result #{value.inspect}" : "no result"}, expected #{expected.inspect}" unless value == expected
  end
end
fail!("#{wrong.size} of #{JOBS} jobs have a missing or wrong result; first: #{wrong.first}") unless wrong.empty?
left = redis.call("LLEN", "queue:#{SidekiqBench::QUEUE}")
fail!("#{left} jobs are still queued after all results came back") unless left.zero?

after = stats.("after", 30)
peak_rss = vm_hwm(@sidekiq)

# Stop: SIGTERM, exit 0 within STOP_TIMEOUT.
stop_started = Bench.now
status = stop(:sidekiq)
shutdown = Bench.now - stop_started
fail!("the Sidekiq process did not exit within #{STOP_TIMEOUT} s of SIGTERM") if status == :timeout
fail!("the Sidekiq process exited with #{status.inspect} after SIGTERM") unless status&.success?
stop(:redis)

gcs = after["count"] - before["count"]
puts "sidekiq-jobs: sidekiq #{Sidekiq::VERSION}, redis #{redis_version}, #{JOBS} jobs checked, concurrency #{CONCURRENCY}, " \
     "window #{WINDOW}, GC #{GC_NAME}; Sidekiq pid #{@sidekiq}: GC.count #{before["count"]} -> #{after["count"]} " \
     "(minor #{after["minor"] - before["minor"]}, major #{after["major"] - before["major"]} during the jobs), " \
     "VmHWM #{peak_rss} kB; exited 0 on SIGTERM"
Bench.figure("jobs/s", JOBS / total, "jobs/s")
Bench.percentiles("latency", latencies, [50, 99, 100])
Bench.figure("sidekiq peak RSS", peak_rss, "kB", better: :lower)
Bench.figure("sidekiq GCs", gcs, "GCs", better: :lower)
Bench.figure("shutdown", shutdown, "s", better: :lower)
