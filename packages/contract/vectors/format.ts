/**
 * Shared scenario vectors: one behaviour, two editions. A vector is a timeline of calls, clock moves and the
 * outcomes expected at each point, written as data; one driver, the contract suite suites/vectors.test.ts, runs
 * every vector under the TestClock, and each edition runs that suite against itself (importing this file as
 * `#vectors`). A vector that fails in one edition only is a bug of that edition.
 *
 * Plain TypeScript (node:fs only): no Effect import, so both editions' test suites load it. README.md beside
 * this file describes the format and what each subject's calls say.
 */
import { readFileSync } from "node:fs"

/** What the vectors of one file exercise; the file is `<subject>.json`. */
export type Subject = "backoff" | "retry" | "deadline" | "bulkhead" | "hedge" | "rateLimiter" | "throttle"

/** Every subject that has vectors, in the order the driver runs them. */
export const subjects: ReadonlyArray<Subject> = [
  "backoff",
  "retry",
  "deadline",
  "bulkhead",
  "hedge",
  "rateLimiter",
  "throttle"
]

/**
 * Subjects whose vectors run in a driver file of their own in each edition (`test/vectors.<subject>.test.ts`), not in
 * the shared driver (suites/vectors.test.ts): they need more of the edition than it imports (its HTTP, store or
 * breaker modules).
 */
export type OwnSubject = "idempotency" | "breaker"

export const ownSubjects: ReadonlyArray<OwnSubject> = ["idempotency", "breaker"]

/** JSON values, as written in the files. */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

export interface VectorFile {
  readonly subject: Subject | OwnSubject
  readonly description: string
  readonly vectors: ReadonlyArray<Vector>
}

export interface Vector {
  readonly name: string
  /** The policy's options, as the module takes them, with every duration in milliseconds (per subject). */
  readonly policy: { readonly [option: string]: Json }
  /** What `Random` draws, in order, cycling. Vectors whose result depends on a draw must set it. */
  readonly random?: ReadonlyArray<number>
  /** The TestClock's time (epoch milliseconds) when the vector starts; default 0. */
  readonly startAt?: number
  readonly steps: ReadonlyArray<Step>
}

/** One step of the timeline. Between steps, the driver lets every fiber run until it waits. */
export type Step =
  | CallStep
  | { readonly advance: number }
  | { readonly interrupt: string }
  | { readonly expect: { readonly [call: string]: Outcome } }
  | { readonly expectState: { readonly [field: string]: Json } }

/**
 * Starts the call named `call` now, in a fiber of its own. The other fields say what the call does; each
 * subject reads its own (README.md).
 */
export interface CallStep {
  readonly call: string
  readonly [field: string]: Json
}

/**
 * What a call has done by the time of the `expect` step. Fields left out are not compared; a `fail` object is
 * compared on the fields it names (durations in milliseconds), so `{ "_tag": "BulkheadFull" }` matches any reason.
 */
export interface Outcome {
  readonly exit?: "pending" | "interrupted" | { readonly succeed: Json } | { readonly fail: Json }
  /** The instants at which the call's attempts (retry), copies (hedge) or work (bulkhead) started. */
  readonly starts?: ReadonlyArray<number>
  /** Hedge: the copies (from 1) that were interrupted. */
  readonly interrupted?: ReadonlyArray<number>
  /** Backoff: the delays (ms) the schedule chose. */
  readonly delays?: ReadonlyArray<number>
  /** Deadline, bulkhead, throttle: whether the call's own work ran at all. */
  readonly ran?: boolean
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const stepKinds = ["call", "advance", "interrupt", "expect", "expectState"] as const

/** Why `file` is not a well-formed vector file, or `undefined`: a malformed file fails loudly, never silently. */
export const problem = (subject: Subject | OwnSubject, file: unknown): string | undefined => {
  if (!isObject(file)) return "not an object"
  if (file.subject !== subject) return `subject is ${String(file.subject)}, expected ${subject}`
  if (typeof file.description !== "string") return "no description"
  if (!Array.isArray(file.vectors) || file.vectors.length === 0) return "no vectors"
  const names = new Set<string>()
  for (const vector of file.vectors as ReadonlyArray<unknown>) {
    if (!isObject(vector) || typeof vector.name !== "string") return "a vector without a name"
    if (names.has(vector.name)) return `two vectors named "${vector.name}"`
    names.add(vector.name)
    if (!isObject(vector.policy)) return `${vector.name}: no policy`
    if (!Array.isArray(vector.steps) || vector.steps.length === 0) return `${vector.name}: no steps`
    let expects = 0
    for (const step of vector.steps as ReadonlyArray<unknown>) {
      const kinds = isObject(step) ? stepKinds.filter((k) => k in step) : []
      if (kinds.length !== 1) return `${vector.name}: a step must have exactly one of ${stepKinds.join(", ")}`
      if (kinds[0] === "expect" || kinds[0] === "expectState") expects++
    }
    if (expects === 0) return `${vector.name}: expects nothing`
  }
  return undefined
}

/** Reads and checks `<subject>.json`. */
export const load = (subject: Subject | OwnSubject): VectorFile => {
  const file: unknown = JSON.parse(readFileSync(new URL(`./${subject}.json`, import.meta.url), "utf8"))
  const why = problem(subject, file)
  if (why !== undefined) throw new Error(`vectors/${subject}.json: ${why}`)
  return file as VectorFile
}
