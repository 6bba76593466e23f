# schedule.cmake -- how ctest runs the tests of tests/CMakeLists.txt side
# by side (issue 28 item 5: make test within 4 minutes on 2 cores).
#
# scripts/test_summary.sh runs three tests per core (ctest -j 6 on 2
# cores). Most integration tests spend much of their time waiting (on a
# daemon's deadline, a job, a poll): with one test per core (before), two
# waiting tests left the cores idle, and the tests took 161 s for about
# 240 s of CPU time; with more per core, a test's CPU bursts run in
# another's waits (two per core, then three once the fuzz and arm64 trees
# were built before ctest: figures in docs/build.md). Every test takes one
# slot: ctest starts the first test of its queue that fits, so a test of
# two slots waits until the queue is empty (it_cross_arm64 behind
# everything, measured).
#
# Instead, the tests whose checks a slowed daemon could miss never run
# beside the two that build trees of their own at -j2 (fuzz_smoke,
# it_cross_arm64), nor beside each other (RESOURCE_LOCK: tests that name
# the same lock do not run at once):
#   it_reads_off_writer  POST /v1/tune's median under 250 ms beside 16 readers
#   rel_load             the job's predicted cost within the job budget (on
#                        a loaded machine the kernels time slow and the
#                        job is refused)
#   it_export_limits     a 30,000-row import within the export deadline
if(TEST fuzz_smoke)
  set_tests_properties(fuzz_smoke PROPERTIES RESOURCE_LOCK attune_tree_a)
endif()
set_tests_properties(it_cross_arm64 PROPERTIES RESOURCE_LOCK attune_tree_b)
foreach(t it_reads_off_writer rel_load it_export_limits)
  if(TEST ${t})
    set_tests_properties(${t} PROPERTIES RESOURCE_LOCK "attune_tree_a;attune_tree_b")
  endif()
endforeach()
# it_noisy_hog runs busy loops, two per core, for its few seconds: alone,
# so that no other test is timed under them.
set_tests_properties(it_noisy_hog PROPERTIES RUN_SERIAL TRUE)

# The tests that compile start first. A clean clone (CI) has no timings for
# ctest to order by, so it started tests in the order above and fuzz_smoke
# (a tree of its own, about a minute) came last, the other slot idle beside
# it. it_arch_check (cuda_fused.cu for sm_87 and sm_110: ~90 s of CPU cold),
# fuzz_smoke and it_cross_arm64 now run beside the tests that mostly wait on
# a daemon. An explicit COST also wins over a warm tree's recorded times, in
# which it_arch_check is a cached 0.4 s even after a kernel edit.
set_tests_properties(it_arch_check PROPERTIES COST 1002)
# Before them the three timing tests above, one after another (their
# locks), while the trees' job may still build (niced; the two tests
# wait for it: tests/CMakeLists.txt): after fuzz_smoke and it_cross_arm64
# the three ran last, alone for their last 30 s (4c3af55 + the lock: tests
# 189 s).
set(cost 1005)
foreach(t it_export_limits it_reads_off_writer rel_load)
  if(TEST ${t})
    set_tests_properties(${t} PROPERTIES COST ${cost})
    math(EXPR cost "${cost} - 1")
  endif()
endforeach()
if(TEST fuzz_smoke)
  set_tests_properties(fuzz_smoke PROPERTIES COST 1001)
endif()
set_tests_properties(it_cross_arm64 PROPERTIES COST 1000)
# Then the longest (their seconds alone on the 2-core VM), so that the last
# to start are short ones and no long test ends alone. it_fleet_stream (17
# s alone, 21-28 s at -j4) had no COST and started 95-120 s into the cold
# runs at ce8e1c1 and e50d3d8, last, alone for its final 5-8 s; a replay
# of e50d3d8's durations in this order: 124.7 s instead of 127.6.
# Under `make test` fuzz_smoke's and it_cross_arm64's trees are built by
# scripts/test_trees.sh: 23 s and 9 s there, not 62 and 51.
foreach(t_s it_package:29 it_page_browser:23 it_fleet_pg:17
            it_fleet_stream:17 it_fleet_clone:14 it_python_install:14 it_daemon:13 it_miss_jobs:12
            rel_crash_loop:10 rel_slow_clients:9 it_fleet_overlap:9 loo:7)
  string(REPLACE ":" ";" t_s ${t_s})
  list(GET t_s 0 t)
  list(GET t_s 1 s)
  if(TEST ${t})
    set_tests_properties(${t} PROPERTIES COST ${s})
  endif()
endforeach()
