/**
 * The generator's side of `npm run overload -- --mix`: `npm run serve -- --shed ...` prints `shed limit <n>` each
 * time the load-shed limit changed (limitReport.ts, in either edition), and these are read back from its output.
 */

/** The limits printed in `output`, in order. */
export const shedLimits = (output: string): ReadonlyArray<number> =>
  Array.from(output.matchAll(/^shed limit (\d+)$/gm), (m) => Number(m[1]))
