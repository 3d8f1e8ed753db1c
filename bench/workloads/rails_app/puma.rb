# Puma's configuration for the puma-cluster workload (bench/workloads/puma_cluster.rb): cluster
# mode, 2 workers of 3 threads, the app (config.ru) booted once in the master (preload_app!), and
# before the fork the master drops its database connections and runs Process.warmup, as a
# production deployment would. Port from MOSAIC_PUMA_PORT (127.0.0.1 only). SIGTERM stops the
# server gracefully with exit status 0; a worker still alive 10 s after it (an occasional hang of a
# worker's shutdown, seen under both GCs and with Puma 6.6.1 and 7.2.1) is killed by the master,
# which the workload reports as a warning.
workers 2
threads 3, 3
preload_app!
bind "tcp://127.0.0.1:#{ENV.fetch("MOSAIC_PUMA_PORT")}"
rackup File.join(__dir__, "config.ru")
environment "production"
raise_exception_on_sigterm false
log_requests false
worker_boot_timeout 120
worker_shutdown_timeout 10

before_fork do
  ActiveRecord::Base.connection_handler.clear_all_connections!
  Process.warmup
end
