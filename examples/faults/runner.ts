/**
 * The runner of `npm run faults`, shared by both editions (examples/faults.ts here, packages/effect4/examples/faults.ts
 * for the Effect 4 edition): the command line, the table and the verdict. Plain Node: each edition passes its own
 * list of faults.
 */
import type { Fault, FaultRow } from "./fault.js"

/** Whether a row fails the suite: something lost or duplicated, or its bound broken. */
export const failed = (row: FaultRow): boolean => row.lost > 0 || row.duplicated > 0 || row.ok === false

/** The rows as an aligned table (the notes column last, unpadded). */
export const table = (rows: ReadonlyArray<FaultRow>): string => {
  const header = ["fault", "offered", "lost", "duplicated", "ok", "notes"]
  const cells = rows.map((r) => [
    r.fault,
    String(r.offered),
    String(r.lost),
    String(r.duplicated),
    failed(r) ? "FAIL" : "ok",
    r.notes
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)))
  const line = (c: ReadonlyArray<string>) =>
    c.map((cell, i) =>
      i === c.length - 1 ? cell : i >= 1 && i <= 3 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)
    ).join("  ")
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...cells.map(line)].join("\n")
}

const usage = "usage: npm run faults -- [--only <name>] [--json]\nfaults: "

/**
 * `npm run faults`' command line over `faults` (either edition's list): runs them (all, or `--only <name>`) one
 * after another, prints the table and the totals, and exits 0 when every fault survived, 1 when not, 2 on a bad
 * option.
 */
export const cli = async (faults: ReadonlyArray<Fault>): Promise<never> => {
  const argv = process.argv.slice(2)
  const names = faults.map((f) => f.name)
  let only: string | undefined
  let json = false
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === "--json") json = true
    else if (arg === "--only" && argv[i + 1] !== undefined && !names.includes(argv[i + 1]!)) {
      console.error(`unknown fault ${argv[i + 1]}\n${usage}${names.join(", ")}`)
      process.exit(2)
    } else if (arg === "--only" && argv[i + 1] !== undefined) only = argv[++i]
    else {
      console.error(`${arg === "--help" || arg === "-h" ? "" : `bad option ${arg}\n`}${usage}${names.join(", ")}`)
      process.exit(arg === "--help" || arg === "-h" ? 0 : 2)
    }
  }
  const rows: Array<FaultRow> = []
  const started = performance.now()
  for (const fault of faults.filter((f) => only === undefined || f.name === only)) {
    const begun = performance.now()
    console.error(`running ${fault.name}…`)
    try {
      rows.push(...await fault.run())
    } catch (error) {
      rows.push({
        fault: fault.name,
        offered: 0,
        lost: 0,
        duplicated: 0,
        ok: false,
        notes: `did not run to its end: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`
      })
    }
    console.error(`${fault.name}: ${((performance.now() - begun) / 1000).toFixed(1)} s`)
  }
  const bad = rows.filter(failed)
  console.log(table(rows))
  const offered = rows.reduce((n, r) => n + r.offered, 0)
  const lost = rows.reduce((n, r) => n + r.lost, 0)
  const duplicated = rows.reduce((n, r) => n + r.duplicated, 0)
  console.log(
    `\n${rows.length} rows, ${offered} offered, ${lost} lost, ${duplicated} duplicated, ` +
      `${rows.filter((r) => r.ok === false).length} bounds broken, ` +
      `${((performance.now() - started) / 1000).toFixed(1)} s: ${bad.length === 0 ? "every fault survived" : "FAILED"}`
  )
  if (json) console.log(JSON.stringify(rows))
  return process.exit(bad.length === 0 ? 0 : 1) // without waiting for idle keep-alive sockets
}
