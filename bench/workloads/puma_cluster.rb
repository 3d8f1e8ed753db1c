# Workload "puma-cluster": a real forking server, end to end. Puma in cluster mode (2 workers of 3
# threads, preload_app!, Process.warmup in before_fork: rails_app/puma.rb) serves the rails
# workload's app (rails_app/config.ru) on 127.0.0.1, under this Ruby and this RUBY_GC_LIBRARY
# (inherited). A load generator in this process (Net::HTTP, keep-alive, 4 client threads) sends a
# fixed number of requests of the rails mix (rails_app/mix.rb) and checks every answer: its status,
# a body marker, and its X-Bench-GC header (the serving worker's GC must be this process's GC).
# Meanwhile a sampler reads each worker's Rss, Pss and Private_Dirty (/proc/PID/smaps_rollup; the
# workers are the master's children). At the end, GET /__bench over fresh connections reaches each
# worker for its GC.count; then SIGTERM, and the master must exit 0 within 30 s. A worker that
# outlives SIGTERM by 10 s is killed by Puma (worker_shutdown_timeout): a warning, and the
# "shutdown" figure shows it (an occasional hang seen under both GCs, Puma 6.6.1 and 7.2.1).
# Fails (non-zero, one clear message) on a failed request, a crash, a worker restart (worker pids
# must not change from the first sample to the last) or a wrong GC.
# Figures: requests/s, latency p50/p99/max (ms), at the end the median over workers of Pss and
# Private_Dirty (kB), the median worker's GC count during the timed requests, and the seconds
# from SIGTERM to the master's exit.
# Usage: ruby bench/workloads/puma_cluster.rb [--quick] [--requests N]   (full 4000, quick 300)
require_relative "../lib/bench_support"
require "net/http"
require "socket"
require "json"
require "tmpdir"

Bench.skip("no /proc/self/smaps_rollup on this system") unless File.readable?("/proc/self/smaps_rollup")
Bench.skip("fork is not available") unless Process.respond_to?(:fork)
Bench.use_gems("puma", "railties", "actionpack", "actionview", "activerecord", "sqlite3")
require_relative "rails_app/mix"

REQUESTS = ARGV.include?("--requests") ? Integer(ARGV[ARGV.index("--requests") + 1]) : Bench.size(4000, 300)
CLIENTS = 4
WORKERS = 2
GC_NAME = GC.config[:implementation].to_s
APP_DIR = File.join(__dir__, "rails_app")
BOOT_TIMEOUT = 180
STOP_TIMEOUT = 30

def fail!(msg)
  warn "puma-cluster: FAILED: #{msg}"
  if defined?(@log) && File.exist?(@log)
    warn "puma-cluster: last lines of the server's log:"
    warn File.readlines(@log).last(25).join
  end
  stop_server(kill: true)
  kill_group
  exit 1
end

# The server runs in its own process group (the master's pid): KILL whatever of it is left.
def kill_group
  Process.kill(:KILL, -@master) if @master
rescue Errno::ESRCH, Errno::EPERM
  nil
end

def children(pid)
  Dir.glob("/proc/#{pid}/task/*/children").flat_map { |f| File.read(f).split.map(&:to_i) }.sort
rescue Errno::ENOENT, Errno::ESRCH
  []
end

def rollup(pid)
  text = File.read("/proc/#{pid}/smaps_rollup")
  kb = ->(field) { text[/^#{field}:\s+(\d+) kB/, 1].to_i }
  { rss: kb.("Rss"), pss: kb.("Pss"), private_dirty: kb.("Private_Dirty") }
rescue Errno::ENOENT, Errno::ESRCH
  nil
end

def stop_server(kill: false)
  return unless @master && !@master_status
  Process.kill(kill ? :KILL : :TERM, @master)
  deadline = Bench.now + STOP_TIMEOUT
  until (r = Process.wait2(@master, Process::WNOHANG))
    if Bench.now > deadline
      kill_group
      @master_status = Process.wait2(@master).last
      return :timeout
    end
    sleep 0.05
  end
  @master_status = r.last
rescue Errno::ESRCH, Errno::ECHILD
  nil
end

median = ->(v) { s = v.sort; s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2.0 }

# A free port: the kernel picks one, and Puma binds it right after.
port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
tmp = Dir.mktmpdir("mosaic-bench-puma-")
at_exit { FileUtils.rm_rf(tmp) }
@log = File.join(tmp, "puma.log")
launch = <<~RUBY
  Gem.use_paths(#{Bench::GEM_DIR.dump}, [#{Bench::GEM_DIR.dump}])
  %w[puma railties actionpack actionview activerecord sqlite3].each { |g| gem g }
  require "puma/cli"
  Puma::CLI.new(["-C", #{File.join(APP_DIR, "puma.rb").dump}]).run
RUBY
env = { "MOSAIC_PUMA_PORT" => port.to_s, "MOSAIC_BENCH_FIGURES" => nil }
@master = Process.spawn(env, RbConfig.ruby, "-e", launch, in: File::NULL, out: @log, err: @log, pgroup: true)
at_exit { stop_server(kill: true) if @master && !@master_status; kill_group } # no server is left

# Boot: both workers forked and the server answering.
deadline = Bench.now + BOOT_TIMEOUT
res = nil
loop do
  if (r = Process.wait2(@master, Process::WNOHANG))
    @master_status = r.last
    fail!("the server exited during boot (#{@master_status.inspect})")
  end
  if children(@master).size == WORKERS
    begin
      res = Net::HTTP.start("127.0.0.1", port, open_timeout: 2, read_timeout: 30) { |h| h.get("/__bench") }
      break if res.code == "200"
    rescue SystemCallError, Net::OpenTimeout, Net::ReadTimeout, EOFError
      nil
    end
  end
  fail!("the server did not come up within #{BOOT_TIMEOUT} s") if Bench.now > deadline
  sleep 0.2
end
ids = JSON.parse(res.body)
post_ids, author_ids = ids.fetch("post_ids"), ids.fetch("author_ids")

# Worker memory, sampled every 0.25 s while the load runs.
samples = []
sampler_stop = false
sample = -> { samples << children(@master).to_h { |pid| [pid, rollup(pid)] } }
sample.()
sampler = Thread.new do
  until sampler_stop
    sleep 0.25
    sample.()
  end
end

# The load: CLIENTS threads take request numbers from a counter until REQUESTS are sent.
gc_seen = Hash.new { |h, k| h[k] = [] } # worker pid -> GC.count seen in its answers, in order
errors = Queue.new
latencies = Array.new(REQUESTS)
next_i = 0
lock = Mutex.new
check = lambda do |i, res|
  verb_status = RailsBench.expected_status(i)
  status = res.code.to_i
  marker = case verb_status
           when 302 then res["location"].to_s.include?("/posts/")
           else res.body.to_s.include?(i % 20 >= 16 ? '"title"' : "</html>")
           end
  return "request #{i}: status #{status} (expected #{verb_status}): #{res.body.to_s[0, 200]}" unless status == verb_status
  return "request #{i}: body marker missing: #{res.body.to_s[0, 200]}" unless marker
  pid, count, gc = res["x-bench-gc"].to_s.split
  return "request #{i}: no X-Bench-GC header" unless gc
  return "request #{i}: served by GC #{gc}, expected #{GC_NAME}" unless gc == GC_NAME
  lock.synchronize { gc_seen[pid.to_i] << count.to_i }
  nil
end
total = Bench.time do
  CLIENTS.times.map do
    Thread.new do
      Net::HTTP.start("127.0.0.1", port, open_timeout: 5, read_timeout: 60) do |http|
        loop do
          i = lock.synchronize { next_i < REQUESTS ? (next_i += 1) - 1 : nil }
          break unless i && errors.empty?
          verb, path, params = RailsBench.route(i, post_ids, author_ids)
          req = verb == :post ? Net::HTTP::Post.new(path).tap { |r| r.set_form_data(params) } : Net::HTTP::Get.new(path)
          t = Bench.now
          res = http.request(req)
          latencies[i] = Bench.now - t
          (msg = check.(i, res)) and errors << msg
        end
      end
    rescue StandardError => e
      errors << "client: #{e.class}: #{e.message}"
    end
  end.each(&:join)
end
sampler_stop = true
sampler.join
sample.()
fail!("#{errors.size} failed request(s); first: #{errors.pop}") unless errors.empty?

# Each worker's GC, over fresh connections (the kernel spreads them over the workers' listeners).
final = {}
deadline = Bench.now + 20
while final.size < WORKERS && Bench.now < deadline
  res = Net::HTTP.start("127.0.0.1", port, open_timeout: 5, read_timeout: 30) { |h| h.get("/__bench") }
  info = JSON.parse(res.body)
  fail!("worker #{info["pid"]} runs GC #{info["gc"]}, expected #{GC_NAME}") unless info["gc"] == GC_NAME
  final[info["pid"]] = info["gc_count"]
end

# Stop: SIGTERM, exit 0 within STOP_TIMEOUT.
first_pids, last_pids = samples.first.keys.sort, samples.last.keys.sort
workers_final = samples.last
stop_started = Bench.now
stopped = stop_server
shutdown = Bench.now - stop_started
fail!("the server did not exit within #{STOP_TIMEOUT} s of SIGTERM") if stopped == :timeout
fail!("the server exited with #{@master_status.inspect} after SIGTERM") unless @master_status&.success?
fail!("expected #{WORKERS} workers, first sample has #{first_pids.inspect}") unless first_pids.size == WORKERS
changed = samples.map(&:keys).map(&:sort).uniq
fail!("workers were restarted or died: worker pids over the run #{changed.inspect}") unless changed.size == 1
fail!("a worker never answered /__bench: answered #{final.keys.inspect}, workers #{first_pids.inspect}") unless final.keys.sort == first_pids
fail!("no memory sample of a worker at the end") unless workers_final.values.all?
fail!("answers came from unknown processes #{gc_seen.keys - first_pids}") unless (gc_seen.keys - first_pids).empty?

gcs_during = first_pids.map { |pid| final[pid] - (gc_seen[pid].min || final[pid]) }
peak_rss = samples.flat_map { |s| s.values.compact.map { |m| m[:rss] } }.max
puts "puma-cluster: #{ids["server"]}, #{REQUESTS} requests, #{CLIENTS} clients, #{WORKERS} workers (#{first_pids.join(" ")}), GC #{GC_NAME}; " \
     "per worker at the end Pss kB #{first_pids.map { |p| workers_final[p][:pss] }.join(" ")}, " \
     "Private_Dirty kB #{first_pids.map { |p| workers_final[p][:private_dirty] }.join(" ")}, " \
     "GC.count #{first_pids.map { |p| final[p] }.join(" ")}, answers #{first_pids.map { |p| gc_seen[p].size }.join(" ")}; " \
     "peak worker Rss #{peak_rss} kB; #{samples.size} samples; server exited 0 on SIGTERM"
if shutdown >= 10
  warn "puma-cluster: WARNING: shutdown took #{shutdown.round(1)} s: a worker outlived SIGTERM and Puma's " \
       "worker_shutdown_timeout (10 s) killed it"
end
Bench.figure("requests/s", REQUESTS / total, "req/s")
Bench.percentiles("latency", latencies, [50, 99, 100])
Bench.figure("worker Pss median", median.(first_pids.map { |p| workers_final[p][:pss] }).round, "kB", better: :lower)
Bench.figure("worker Private_Dirty median", median.(first_pids.map { |p| workers_final[p][:private_dirty] }).round, "kB", better: :lower)
Bench.figure("worker GCs median", median.(gcs_during).round, "GCs", better: :lower)
Bench.figure("shutdown", shutdown, "s", better: :lower)
