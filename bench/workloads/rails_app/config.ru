# The Rack entry of the benchmark's Rails app (bench_app.rb) for a real server: the puma-cluster
# workload (bench/workloads/puma_cluster.rb) serves it with Puma (puma.rb next to this file). The
# server's processes share one sqlite3 file, so a write waits up to 10 s for another's lock.
#
# GET /__bench answers, as JSON, the server's name and version, which process served it and with
# which GC (pid, GC.count, GC.config[:implementation]) and the ids the request mix uses; every other response carries an
# X-Bench-GC header "pid gc-count implementation", so the load generator checks each answer's GC.
module RailsBench
  SQLITE_TIMEOUT_MS = 10_000
end
require_relative "bench_app"

class BenchGCReport
  def initialize(app) = @app = app

  def call(env)
    if env["PATH_INFO"] == "/__bench"
      body = JSON.generate(server: env["SERVER_SOFTWARE"], pid: Process.pid, gc_count: GC.count, gc: GC.config[:implementation].to_s,
                           post_ids: RailsBench::POST_IDS, author_ids: RailsBench::AUTHOR_IDS)
      return [200, { "content-type" => "application/json" }, [body]]
    end
    status, headers, body = @app.call(env)
    headers["x-bench-gc"] = "#{Process.pid} #{GC.count} #{GC.config[:implementation]}"
    [status, headers, body]
  end
end

use BenchGCReport
run BenchApp
