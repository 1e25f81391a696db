/**
 * `npm run simulate`: reproduces Marc Brooker's "Exponential Backoff And Jitter" (AWS Architecture Blog,
 * 2015) with this library's `Backoff` schedules. See docs/simulation.md for the model.
 *
 *   npm run simulate -- --clients 10..190:10 --runs 100 --seed 2015 --out sim-out/ --algorithms all
 *
 * Writes <out>/results.csv, <out>/simulation-calls.svg and <out>/simulation-time.svg, prints a summary
 * table and the wall time. The sweep is split over worker threads (this file again, in worker mode);
 * every (clients, algorithm) cell is seeded on its own, so the CSV does not depend on the split.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { availableParallelism } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { parentPort, workerData } from "node:worker_threads"
import { runPool, start } from "../../../examples/support/workerPool.js"
import { type Algorithm, algorithms } from "./simulate/backoff.js"
import { toCsv } from "./simulate/csv.js"
import { parseAlgorithms, parseClients, parseRuns } from "./simulate/options.js"
import { callsChart, summary, timeChart } from "./simulate/report.js"
import { type Row, sweep } from "./simulate/sweep.js"

interface Task {
  readonly clients: number
  readonly algorithm: Algorithm
}

interface Job {
  readonly runs: number
  readonly seed: string
}

const usage = `usage: npm run simulate -- [options]

  --clients SPEC      client counts: a list and/or ranges from..to[:step]   (default 10..190:10)
  --runs N            runs averaged per point                                (default 100)
  --seed S            any string; the same seed gives the same results.csv   (default 2015)
  --out DIR           output directory                                       (default sim-out/)
  --algorithms LIST   comma-separated subset of ${algorithms.join(",")} or all   (default all)
  --threads N         threads computing the sweep                            (default: CPU count, at most 4)
  --help`

const runWorker = () => {
  const job = workerData as Job
  parentPort!.on("message", (task: Task) => {
    const [row] = sweep({ clients: [task.clients], algorithms: [task.algorithm], runs: job.runs, seed: job.seed })
    parentPort!.postMessage(row)
  })
}

/** Hands out cells, most expensive first, to the main thread and `threads - 1` workers; resolves with every row. */
const runParallel = (tasks: ReadonlyArray<Task>, job: Job, threads: number) =>
  runPool([...tasks].sort((a, b) => b.clients - a.clients), {
    threads,
    moduleUrl: import.meta.url,
    workerData: job,
    compute: (task: Task) =>
      sweep({ clients: [task.clients], algorithms: [task.algorithm], runs: job.runs, seed: job.seed })[0]!
  })

const main = async () => {
  const { values } = parseArgs({
    options: {
      clients: { type: "string", default: "10..190:10" },
      runs: { type: "string", default: "100" },
      seed: { type: "string", default: "2015" },
      out: { type: "string", default: "sim-out/" },
      algorithms: { type: "string", default: "all" },
      threads: { type: "string" },
      help: { type: "boolean", default: false }
    }
  })
  if (values.help) {
    console.log(usage)
    return
  }
  const clients = parseClients(values.clients)
  const chosen = parseAlgorithms(values.algorithms)
  const job: Job = { runs: parseRuns(values.runs), seed: values.seed }
  const threads = values.threads === undefined ? Math.min(4, availableParallelism()) : parseRuns(values.threads)

  console.log(
    `simulating ${clients.length} client counts (${clients[0]}..${clients.at(-1)}) × ${chosen.length} algorithms × ` +
      `${job.runs} runs, seed ${job.seed}, ${threads} thread${threads === 1 ? "" : "s"}`
  )
  const started = performance.now()
  const tasks = clients.flatMap((c) => chosen.map((algorithm) => ({ clients: c, algorithm })))
  const unordered = await runParallel(tasks, job, threads)
  const rank = (r: Row) => clients.indexOf(r.clients) * algorithms.length + algorithms.indexOf(r.algorithm)
  const rows = [...unordered].sort((a, b) => rank(a) - rank(b))
  const seconds = (performance.now() - started) / 1000

  mkdirSync(values.out, { recursive: true })
  const files = {
    "results.csv": toCsv(rows),
    "simulation-calls.svg": callsChart(rows, job),
    "simulation-time.svg": timeChart(rows, job)
  }
  for (const [name, text] of Object.entries(files)) writeFileSync(join(values.out, name), text)

  console.log()
  console.log(summary(rows))
  console.log()
  console.log(`wrote ${Object.keys(files).map((f) => join(values.out, f)).join(", ")}`)
  // performance.now() counts from process start, so the total includes loading TypeScript and effect
  console.log(
    `wall time ${seconds.toFixed(2)} s for the sweep (${threads} thread${threads === 1 ? "" : "s"}), ` +
      `${(performance.now() / 1000).toFixed(2)} s in total`
  )
}

start(main, runWorker, usage)
