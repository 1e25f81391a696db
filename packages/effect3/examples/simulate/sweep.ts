/**
 * The experiment: for every client count and algorithm, average `runs` independent runs. Each run has its
 * own generator seeded from `(seed, clients, run)`, shared by the network and the backoff draws, so the
 * results do not depend on which other algorithms or client counts are in the sweep, and every algorithm
 * starts from the same network luck.
 */
import { type Algorithm, type Driver, fastDriver, type PostParameters, postParameters } from "./backoff.js"
import * as Model from "./model.js"
import { Prng, seedFrom } from "./prng.js"

/** The network of the post: each hop takes |Normal(10 ms, 2 ms)|. */
export interface Network {
  readonly meanMs: number
  readonly sdMs: number
}

export const postNetwork: Network = { meanMs: 10, sdMs: 2 }

export interface SweepOptions {
  readonly clients: ReadonlyArray<number>
  readonly algorithms: ReadonlyArray<Algorithm>
  readonly runs: number
  readonly seed: string
  readonly driver?: Driver
  readonly network?: Network
  readonly backoff?: PostParameters
}

/** One row of `results.csv`: means over the runs. */
export interface Row {
  readonly clients: number
  readonly algorithm: Algorithm
  /** Mean completion time: the last successful write's reply (ms). */
  readonly timeMs: number
  /** Mean write calls per run (the post's "client work"). */
  readonly calls: number
  /** Mean read calls per run (not in the CSV; reads + writes is every call the server saw). */
  readonly reads: number
}

/** A run of the post's model with its own generator. */
export const runOnce = (
  algorithm: Algorithm,
  clients: number,
  seed: number,
  options: Pick<SweepOptions, "driver" | "network" | "backoff"> = {}
): Model.RunResult => {
  const prng = new Prng(seed)
  const { meanMs, sdMs } = options.network ?? postNetwork
  const driver = options.driver ?? fastDriver
  return Model.run({
    clients,
    hop: () => Math.abs(meanMs + sdMs * prng.normal()),
    delays: driver(algorithm, clients, prng, options.backoff ?? postParameters)
  })
}

/** Runs the whole sweep; rows are ordered by client count, then by the order of `algorithms`. */
export const sweep = (options: SweepOptions, onRow?: (row: Row) => void): ReadonlyArray<Row> => {
  const rows: Array<Row> = []
  for (const clients of options.clients) {
    for (const algorithm of options.algorithms) {
      let time = 0
      let writes = 0
      let reads = 0
      for (let r = 0; r < options.runs; r++) {
        const result = runOnce(algorithm, clients, seedFrom(options.seed, clients, r), options)
        time += result.completionMs
        writes += result.writes
        reads += result.reads
      }
      const row: Row = {
        clients,
        algorithm,
        timeMs: time / options.runs,
        calls: writes / options.runs,
        reads: reads / options.runs
      }
      rows.push(row)
      onRow?.(row)
    }
  }
  return rows
}
