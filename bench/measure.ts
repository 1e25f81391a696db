/**
 * Effect-free timing shared by both editions' benches: promise workers for a fixed time, a timed promise loop, and
 * interleaved rounds of several cases (every other round in reverse order, so a drift of the machine hits all alike
 * and the runs of a pair sit next to each other in time).
 */
import { median } from "./report.js"

/** Operations per second of `concurrency` promise workers each running `op` back to back for `millis`. */
export const throughput = async (
  concurrency: number,
  millis: number,
  op: (i: number) => Promise<unknown>
): Promise<number> => {
  let done = 0
  const start = process.hrtime.bigint()
  const end = start + BigInt(millis) * 1_000_000n
  const worker = async (w: number) => {
    for (let i = w; process.hrtime.bigint() < end; i += concurrency) {
      await op(i)
      done++
    }
  }
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)))
  return done / (Number(process.hrtime.bigint() - start) / 1e9)
}

/** ns per call of `ops` sequential awaited calls of `call`: the median of `rounds` rounds after a warm-up. */
export const timePromiseLoop = async (
  call: (i: number) => Promise<unknown>,
  ops = 5_000,
  rounds = 7
): Promise<number> => {
  const loop = async (n: number) => {
    for (let i = 0; i < n; i++) await call(i)
  }
  await loop(1_000)
  const samples: Array<number> = []
  for (let r = 0; r < rounds; r++) {
    const start = process.hrtime.bigint()
    await loop(ops)
    samples.push(Number(process.hrtime.bigint() - start) / ops)
  }
  return median(samples)
}

/**
 * Runs every case `rounds` times by turns after `warmup` rounds: each case's samples (whatever unit its run
 * returns: per-second rates or ns), in the order of `cases`.
 */
export const interleaved = async (
  cases: ReadonlyArray<() => Promise<number>>,
  rounds: number,
  warmup = 0
): Promise<Array<Array<number>>> => {
  for (let round = 0; round < warmup; round++) for (const run of cases) await run()
  const samples = cases.map(() => [] as Array<number>)
  for (let round = 0; round < rounds; round++) {
    const order = [...cases.keys()]
    if (round % 2 === 1) order.reverse()
    for (const i of order) samples[i]!.push(await cases[i]!())
  }
  return samples
}

/** The median of the per-round ratios `a[round] / b[round]`: a round's two runs share the machine's state. */
export const pairedRatio = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): number =>
  median(a.map((x, round) => x / b[round]!))
