# Loaded with -r into every measured Ruby process by bench/run.rb: at exit it writes what the
# process measured about itself as JSON to $MOSAIC_BENCH_PROBE: the GC library in use, peak RSS
# (VmHWM, kB), GC count and GC time (GC.stat(:time), ms). Wall time is taken by the parent.
if (out = ENV["MOSAIC_BENCH_PROBE"])
  at_exit do
    hwm_kb = (File.read("/proc/self/status")[/^VmHWM:\s+(\d+) kB/, 1] rescue nil).to_i
    s = GC.stat
    File.write(out, %({"gc":"#{GC.config[:implementation]}","peak_rss_kb":#{hwm_kb},) +
                    %("gc_count":#{s[:count]},"gc_time_ms":#{s[:time]},) +
                    %("major_gc_count":#{s[:major_gc_count].to_i},"minor_gc_count":#{s[:minor_gc_count].to_i}}))
  end
end
