/**
 * A small pool for the simulations: the main thread and `threads - 1` worker threads take tasks from one queue
 * (in the order given: put the heaviest first), and the results come back in the order they finish.
 */
import { isMainThread, type ResourceLimits, Worker } from "node:worker_threads"

/**
 * The code a worker evaluates to load `moduleUrl` in worker mode. Under tsx the TypeScript loader is not
 * inherited by worker threads, so the worker registers it before importing the module; or it imports `preload`
 * first, a module that registers other hooks (the Effect 4 edition's, over node's own type stripping).
 */
const workerSource = (moduleUrl: string, preload: string | undefined) => {
  const self = JSON.stringify(moduleUrl)
  if (!moduleUrl.endsWith(".ts")) return `import(${self})`
  if (preload !== undefined) return `import(${JSON.stringify(preload)}).then(() => import(${self}))`
  const tsx = JSON.stringify(import.meta.resolve("tsx/esm/api"))
  return `import(${tsx}).then((tsx) => { tsx.register(); return import(${self}) })`
}

export const runPool = async <T, R>(tasks: ReadonlyArray<T>, options: {
  readonly threads: number
  /** The module the workers load; in worker mode it answers each task message with its result. */
  readonly moduleUrl: string
  /** A module a worker imports before a `.ts` `moduleUrl`, to load TypeScript (default: tsx's). */
  readonly preload?: string
  readonly workerData: unknown
  readonly resourceLimits?: ResourceLimits
  /** What the main thread runs for a task: the same computation as the workers'. */
  readonly compute: (task: T) => R
}): Promise<Array<R>> => {
  const queue = [...tasks]
  const results: Array<R> = []
  const workers = Array.from(
    { length: Math.max(0, Math.min(options.threads, queue.length) - 1) },
    () =>
      new Worker(workerSource(options.moduleUrl, options.preload), {
        eval: true,
        workerData: options.workerData,
        ...(options.resourceLimits === undefined ? {} : { resourceLimits: options.resourceLimits })
      })
  )
  const done = workers.map((worker) =>
    new Promise<void>((resolve, reject) => {
      const feed = () => {
        const task = queue.shift()
        if (task !== undefined) return worker.postMessage(task)
        void worker.terminate()
        resolve()
      }
      worker.on("message", (result: R) => {
        results.push(result)
        feed()
      })
      worker.on("error", reject)
      feed()
    })
  )
  for (let task = queue.shift(); task !== undefined; task = queue.shift()) {
    results.push(options.compute(task))
    // let the workers' results in between tasks
    await new Promise((resolve) => setImmediate(resolve))
  }
  await Promise.all(done)
  return results
}

/**
 * Runs `main` on the main thread (a failure prints its message and the usage, exit code 1) and `worker` in a
 * worker thread: the one file is both.
 */
export const start = (main: () => Promise<void>, worker: () => void, usage: string): void => {
  if (isMainThread) {
    main().catch((error: unknown) => {
      console.error(error instanceof Error ? error.message : error)
      console.error(usage)
      process.exitCode = 1
    })
  } else {
    worker()
  }
}
