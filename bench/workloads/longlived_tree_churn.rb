# Workload "longlived-tree-churn": a booted application's shape. First a large long-lived tree of
# Hashes, Arrays and Strings, like the tables an application loads at boot (routes, schema,
# translations, configuration): 3000 "modules" (quick: 800), each a Hash with a name, a table of 12
# "methods" (each a Hash with a name, an Array of argument names, a source line, a doc String of
# 60-450 bytes and a small options Hash), an Array of 30 tag Strings and a Hash of 20 constants:
# about 570k objects (quick 150k), some tens of MB, built once and kept to the end. Then a steady
# loop of 400k requests (quick 60k), each of which reads the tree and allocates request-like young
# garbage, all dropped at once: a params Hash of String keys and values, a few Arrays, interpolated
# Strings, a response body built from parts. Nothing is stored into the tree. A collector that keeps
# the old tree out of the way pays for the loop with minor GCs over a small young generation; how
# far the heap grows for the young garbage sets the peak RSS (Mosaic had 1.62x the default GC's peak
# RSS, 130 against 80 MB, on a program of this shape). Reports the seconds of the request loop (the
# build is not in it).
# Usage: ruby bench/workloads/longlived_tree_churn.rb [--quick]
require_relative "../lib/bench_support"

modules = Bench.size(3000, 800)
requests = Bench.size(400_000, 60_000)
rng = Random.new(31_415)

WORDS = %w[account order item user session cart price tax total line note state city code
           name email phone street country region amount status created updated deleted].freeze

def word(rng) = WORDS[rng.rand(WORDS.size)]

def build_module(i, rng)
  name = "Mod#{i}::#{word(rng).capitalize}#{word(rng).capitalize}"
  methods = {}
  12.times do |m|
    mname = "#{word(rng)}_#{word(rng)}_#{m}"
    methods[mname] = {
      name: mname,
      args: Array.new(rng.rand(4)) { |a| "#{word(rng)}#{a}" },
      source: "#{name}##{mname} at app/models/#{word(rng)}_#{i}.rb:#{rng.rand(900) + 1}",
      doc: Array.new(10 + rng.rand(60)) { word(rng) }.join(" "), # 60-450 bytes: a doc comment
      options: { visibility: (m % 5).zero? ? "private" : "public", arity: rng.rand(4), cached: m.odd? },
    }
  end
  {
    name: name,
    methods: methods,
    tags: Array.new(30) { |t| "#{word(rng)}-#{t}" },
    constants: Array.new(20) { |c| ["#{word(rng).upcase}_#{c}", "value #{i}.#{c} #{word(rng)}"] }.to_h,
  }
end

build = Bench.time do
  # A constant, so the tree stays reachable until the process exits.
  APP = Array.new(modules) { |i| build_module(i, rng) }.freeze
end
METHOD_NAMES = APP.map { |mod| mod[:methods].keys }.freeze

bytes = 0
seconds = Bench.time do
  requests.times do |r|
    mod = APP[rng.rand(modules)]
    names = METHOD_NAMES[mod[:name].size % modules] # another module's names, read only
    meth = mod[:methods][mod[:methods].keys[r % 12]]
    params = {
      "id" => r.to_s, "action" => meth[:name], "format" => (r.odd? ? "json" : "html"),
      "q" => "#{word(rng)} #{word(rng)}", "page" => (r % 40).to_s, "module" => mod[:name],
    }
    args = meth[:args].map { |a| "#{a}=#{params["id"]}" }
    tags = mod[:tags].first(3 + r % 5).map(&:upcase)
    row = { status: 200, headers: { "content-type" => "text/#{params["format"]}" }, names: names.first(2) }
    body = +"<h1>#{mod[:name]}</h1>"
    tags.each { |t| body << "<li>" << t << "</li>" }
    body << "<p>" << args.join("&") << " " << row[:headers]["content-type"] << "</p>"
    bytes += body.bytesize
  end
end

# The tree is whole (outside the timed loop).
raise "longlived-tree-churn: tree lost modules" unless APP.size == modules
raise "longlived-tree-churn: a module lost its methods" unless APP.all? { |m| m[:methods].size == 12 && m[:tags].size == 30 }

# Hashes, Arrays and Strings in the tree (Symbols and Integers are not objects of their own).
def count_objects(v)
  case v
  when Hash then 1 + v.sum { |k, x| count_objects(k) + count_objects(x) }
  when Array then 1 + v.sum { |x| count_objects(x) }
  when String then 1
  else 0
  end
end
objects = count_objects(APP)
puts format("  (%d modules, about %d long-lived objects, built in %.2f s; %d requests, %.0f MB of bodies)",
            modules, objects, build, requests, bytes / 1048576.0)
Bench.figure("longlived-tree-churn requests", seconds, "s", better: :lower)
