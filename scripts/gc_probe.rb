# Loaded with -r into a measured Ruby process: at exit it writes what the process measured
# about itself as JSON to $MOSAIC_PROBE_OUT: peak RSS (VmHWM), GC count and GC time.
# Wall time is measured by the parent, around the whole process.
if (out = ENV["MOSAIC_PROBE_OUT"])
  at_exit do
    status = File.read("/proc/self/status") rescue ""
    hwm_kb = status[/^VmHWM:\s+(\d+) kB/, 1].to_i
    s = GC.stat
    File.write(out, %({"gc":"#{GC.config[:implementation]}","peak_rss_kb":#{hwm_kb},) +
                    %("gc_count":#{s[:count]},"gc_time_ms":#{s[:time]},"major_gc_count":#{s[:major_gc_count]},) +
                    %("minor_gc_count":#{s[:minor_gc_count]},"total_allocated_objects":#{s[:total_allocated_objects]}}))
  end
end
