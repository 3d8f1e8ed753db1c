# The jobs of the sidekiq-jobs workload (bench/workloads/sidekiq_jobs.rb), loaded by the Sidekiq
# process (`sidekiq -r`) and by the workload itself, which computes every job's expected result
# with the same SidekiqBench.compute.
#
# SidekiqBench::OrderJob(i, seed) does what a real job does with its arguments: it builds an order
# of 40 line items (hashes, strings, arrays), round-trips it through JSON, sorts the items, formats
# a text report and takes its SHA-256. It writes "DIGEST GC PID" under its job id in Redis and
# pushes the job id on the done list, in one MULTI; an exception becomes an "error ..." result (no
# retry), so the workload fails at once with the job's message instead of waiting for a retry.
# SidekiqBench::StatsJob(token) writes the process's GC (GC.config[:implementation]), GC.count,
# minor and major GC counts and pid, as JSON, under "stats:TOKEN".
require "json"
require "digest"
require "sidekiq"

module SidekiqBench
  PREFIX = "mosaic-bench"
  DONE = "#{PREFIX}:done"
  QUEUE = "mosaic_bench"

  def self.result_key(jid) = "#{PREFIX}:result:#{jid}"
  def self.stats_key(token) = "#{PREFIX}:stats:#{token}"

  # The job's computation: deterministic in (i, seed), the same in any process of this Ruby.
  def self.compute(i, seed)
    rng = Random.new(seed)
    items = Array.new(40) do |k|
      { "sku" => format("SKU-%06d-%02d", i, k),
        "name" => "item #{rng.rand(36**6).to_s(36)} #{k}",
        "price_cents" => rng.rand(100_000),
        "quantity" => 1 + rng.rand(5),
        "tags" => Array.new(1 + rng.rand(4)) { rng.rand(4096).to_s(16) } }
    end
    order = { "order" => i, "customer" => "customer-#{seed % 9973}", "currency" => "EUR",
              "items" => items, "notes" => "rush" * (seed % 7) }
    parsed = JSON.parse(JSON.generate(order))
    lines = parsed["items"].sort_by { |it| [-it["price_cents"] * it["quantity"], it["sku"]] }.map do |it|
      format("%-16s %-22s %3d x %10.2f %s", it["sku"], it["name"], it["quantity"], it["price_cents"] / 100.0,
             it["tags"].sort.join(","))
    end
    total = parsed["items"].sum { |it| it["price_cents"] * it["quantity"] }
    report = +"order #{parsed["order"]} for #{parsed["customer"]} (#{parsed["currency"]})\n"
    report << lines.join("\n") << format("\ntotal %.2f\n", total / 100.0) << parsed["notes"]
    Digest::SHA256.hexdigest(report)
  end

  class OrderJob
    include Sidekiq::Job
    sidekiq_options queue: QUEUE, retry: false

    def perform(i, seed)
      value = begin
        "#{SidekiqBench.compute(i, seed)} #{GC.config[:implementation]} #{Process.pid}"
      rescue StandardError => e
        "error #{e.class}: #{e.message}"
      end
      Sidekiq.redis do |r|
        r.multi do |tx|
          tx.call("SET", SidekiqBench.result_key(jid), value, "EX", 3600)
          tx.call("RPUSH", DONE, jid)
        end
      end
    end
  end

  class StatsJob
    include Sidekiq::Job
    sidekiq_options queue: QUEUE, retry: false

    def perform(token)
      stat = GC.stat
      info = { "gc" => GC.config[:implementation].to_s, "count" => GC.count, "minor" => stat[:minor_gc_count],
               "major" => stat[:major_gc_count], "pid" => Process.pid }
      Sidekiq.redis { |r| r.call("SET", SidekiqBench.stats_key(token), JSON.generate(info), "EX", 3600) }
    end
  end
end
