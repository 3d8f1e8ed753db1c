# Workload "rails": a railsbench-like Rails application on sqlite3 (models Author, Post, Comment,
# Tag/Tagging; HTML views with a layout and partials, a JSON endpoint and a form POST), driven
# in-process with Rack::MockRequest: thousands of requests in a fixed mix after a warm-up.
# Reports requests/s and the p50/p90/p99/max latency of one request. The app (shared with
# prefork.rb) is bench/workloads/rails_app/bench_app.rb. Gems come from bench/.gems
# (bench/setup.sh); skips without them.
# Usage: ruby bench/workloads/rails.rb [--quick] [--pauses]    (full: 4000 requests, quick: 600)
require_relative "../lib/bench_support"
Bench.use_gems("railties", "actionpack", "actionview", "activerecord", "sqlite3")

require_relative "rails_app/bench_app"

Bench.size(300, 100).times { |i| RailsBench.expect(i, RailsBench.request(i)) } # warm-up

requests = Bench.size(4000, 600)
latencies = Array.new(requests)
total = Bench.time do
  requests.times do |i|
    t = Bench.now
    res = RailsBench.request(i)
    latencies[i] = Bench.now - t
    RailsBench.expect(i, res)
  end
end
Bench.figure("requests/s", requests / total, "req/s")
Bench.percentiles("latency", latencies)
