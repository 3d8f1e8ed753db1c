# Loaded with -r into every measured Ruby process by bench/run.rb: at exit it writes what the
# process measured about itself as JSON to $MOSAIC_BENCH_PROBE. Wall and CPU time are taken by the
# parent.
# With --ballast it also allocates the run's ballast before the workload (end of this file).
#
#   gc                          GC.config[:implementation]: the GC library in use
#   peak_rss_kb, rss_kb         VmHWM and VmRSS (kB) of /proc/self/status; also rss_anon_kb, rss_file_kb
#   gc_count, gc_time_ms, major_gc_count, minor_gc_count           GC.stat
#   heap_live_slots, heap_free_slots, heap_allocated_pages         GC.stat (null when the GC lacks one)
#   mosaic_stats                every GC.stat key starting with mosaic_ (empty under other GCs)
#   allocator, allocator_lib    whose malloc this process calls: the mapping of /proc/self/maps that
#                               holds the address `malloc` resolves to (Fiddle); "glibc", "jemalloc",
#                               "tcmalloc" or the library's file name. Without Fiddle: "jemalloc" /
#                               "tcmalloc" when such a library is mapped, else "glibc" (allocator_how)
#   mallinfo2                   glibc's mallinfo2() (10 size_t fields, bytes), only when the allocator
#                               is glibc on x86_64 (the struct is returned through a hidden pointer,
#                               which is the first argument on x86_64 only); null otherwise
#   pauses                      when $MOSAIC_BENCH_PAUSES names bench/lib/pauses.c built (run.rb builds
#                               it): every stay in the GC timed from the GC_ENTER/GC_EXIT hooks, the
#                               same way under every GC: minor/major pause count, p50, p99, max, sum
#                               (ms), GC wall and GC CPU time (ms). Loaded here, before the workload.
#   cpu_self_s                  CPU time (user + system) of this process, all its threads but no
#                               children, when the probe starts (CLOCK_PROCESS_CPUTIME_ID)
#   probe_ms, probe_cpu_ms      wall and process CPU time spent here; probe_errors: what failed here
#
# Order matters: RSS and GC.stat are read first, before Fiddle is loaded, so the probe's own work
# cannot raise the peak. The probe is cheap (1-4 ms) and never changes the process's exit
# status or output: every part is rescued on its own, warnings are silenced, and a forked child
# (which inherits at_exit hooks) writes nothing.
if ENV["MOSAIC_BENCH_PROBE"]
  module MosaicBenchProbe
    OUT = ENV["MOSAIC_BENCH_PROBE"]
    PID = Process.pid
    PAUSES_ERROR = begin
      require ENV["MOSAIC_BENCH_PAUSES"] if ENV["MOSAIC_BENCH_PAUSES"]
      nil
    rescue LoadError, StandardError => e
      "pauses: #{e.class}: #{e.message}"
    end
    MALLINFO2_FIELDS = %w[arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost].freeze

    module_function

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    # A minimal JSON writer (the probe does not load the json library into measured processes).
    def json(v)
      case v
      when nil then "null"
      when true, false, Integer then v.to_s
      when Float then v.finite? ? v.to_s : "null"
      when Hash then "{" + v.map { |k, x| "#{json(k.to_s)}:#{json(x)}" }.join(",") + "}"
      when Array then "[" + v.map { |x| json(x) }.join(",") + "]"
      else
        '"' + v.to_s.encode("UTF-8", invalid: :replace, undef: :replace)
               .gsub(/["\\\x00-\x1f]/) { |c| format("\\u%04x", c.ord) } + '"'
      end
    end

    def status_kb(status, key) = status[/^#{key}:\s+(\d+) kB/, 1]&.to_i

    def classify(path)
      case File.basename(path.to_s)
      when /jemalloc/ then "jemalloc"
      when /tcmalloc/ then "tcmalloc"
      when /\Alibc[.-]/ then "glibc"
      else File.basename(path.to_s)
      end
    end

    def load_fiddle
      return true if defined?(::Fiddle::Function) && defined?(::Fiddle::Handle::DEFAULT)
      verbose = $VERBOSE
      begin
        $VERBOSE = nil
        require "fiddle" # about 2 ms
        true
      rescue LoadError, StandardError
        false
      ensure
        $VERBOSE = verbose
      end
    end

    def allocator(r, errors)
      maps = File.read("/proc/self/maps")
      if load_fiddle
        addr = ::Fiddle::Handle::DEFAULT["malloc"]
        maps.each_line do |line|
          range = line[/\A\h+-\h+/] or next
          from, to = range.split("-").map! { |x| x.to_i(16) }
          next unless addr >= from && addr < to
          r["allocator_lib"] = line.split(" ", 6)[5].to_s.strip
          r["allocator"] = classify(r["allocator_lib"])
          r["allocator_how"] = "dlsym(malloc) in /proc/self/maps"
          return
        end
        errors << "malloc's address is in no mapping"
      end
      r["allocator"] = if maps.include?("libjemalloc") then "jemalloc"
                       elsif maps.include?("libtcmalloc") then "tcmalloc"
                       else "glibc"
                       end
      r["allocator_how"] = "libraries mapped (/proc/self/maps)"
    rescue StandardError => e
      errors << "allocator: #{e.class}: #{e.message}"
    end

    def mallinfo2(r, errors)
      r["mallinfo2"] = nil
      return unless r["allocator"] == "glibc" && RUBY_PLATFORM.start_with?("x86_64") && load_fiddle
      sym = ::Fiddle::Handle::DEFAULT["mallinfo2"] # glibc >= 2.33
      fn = ::Fiddle::Function.new(sym, [::Fiddle::Types::VOIDP], ::Fiddle::Types::VOIDP)
      buf = ("\0" * (MALLINFO2_FIELDS.size * 8)).b
      fn.call(::Fiddle::Pointer[buf])
      r["mallinfo2"] = MALLINFO2_FIELDS.zip(buf.unpack("Q#{MALLINFO2_FIELDS.size}")).to_h
    rescue StandardError => e
      errors << "mallinfo2: #{e.class}: #{e.message}"
    end

    def cpu_now = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)

    def collect
      t0 = now
      cpu0 = cpu_now
      r = { "cpu_self_s" => cpu0.round(6) }
      errors = []
      begin
        status = File.read("/proc/self/status")
        r["peak_rss_kb"] = status_kb(status, "VmHWM").to_i
        r["rss_kb"] = status_kb(status, "VmRSS")
        r["rss_anon_kb"] = status_kb(status, "RssAnon")
        r["rss_file_kb"] = status_kb(status, "RssFile")
      rescue StandardError => e
        r["peak_rss_kb"] = 0
        errors << "status: #{e.class}: #{e.message}"
      end
      begin
        s = GC.stat
        r["gc"] = GC.config[:implementation].to_s
        r["gc_count"] = s[:count]
        r["gc_time_ms"] = s[:time]
        r["major_gc_count"] = s[:major_gc_count].to_i
        r["minor_gc_count"] = s[:minor_gc_count].to_i
        r["heap_live_slots"] = s[:heap_live_slots]
        r["heap_free_slots"] = s[:heap_free_slots]
        r["heap_allocated_pages"] = s[:heap_allocated_pages]
        # The Hash's memory figures (RSS, glibc's) are as of their latest measurement: one
        # keyed call measures them all now (one walk of malloc's bins; a call per key walked
        # once each: 100 ms at exit with 100k free chunks), then the Hash reports that
        # measurement (docs/DESIGN.md, "Where the memory goes").
        if s.key?(:mosaic_rss_bytes)
          GC.stat(:mosaic_rss_bytes)
          s = GC.stat
        end
        r["mosaic_stats"] = s.select { |k, _| k.to_s.start_with?("mosaic_") }
      rescue StandardError => e
        errors << "GC.stat: #{e.class}: #{e.message}"
      end
      errors << PAUSES_ERROR if PAUSES_ERROR
      begin
        r["pauses"] = ::MosaicBenchPauses.result if defined?(::MosaicBenchPauses)
      rescue StandardError => e
        errors << "pauses: #{e.class}: #{e.message}"
      end
      allocator(r, errors)
      mallinfo2(r, errors)
      r["probe_errors"] = errors unless errors.empty?
      r["probe_ms"] = ((now - t0) * 1000).round(2)
      r["probe_cpu_ms"] = ((cpu_now - cpu0) * 1000).round(2)
      r
    end

    def write
      return unless Process.pid == PID
      File.write(OUT, json(collect))
    rescue Exception # rubocop:disable Lint/RescueException -- nothing may escape into the exit status
      nil
    end
  end

  at_exit { MosaicBenchProbe.write }
end

# bench/run.rb --ballast: MOSAIC_BENCH_BALLAST_MB MiB of small Strings (one 40-byte slot each,
# plus an 8-byte reference in the Array's buffer), allocated here, before the workload, and kept
# alive to the end. It changes nothing in the workload; it moves where its collections fall.
if (ballast_mb = ENV["MOSAIC_BENCH_BALLAST_MB"].to_i) > 0
  $mosaic_bench_ballast = Array.new(ballast_mb * 1048576 / 40) { |i| "b#{i}" }
end
