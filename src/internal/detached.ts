/*
 * Moved to fastPath.ts (`forkDetached`, with its plain-Effect fallback). This re-export keeps the idempotency
 * middleware compiling until it switches to `fastPath.forkDetached`; delete the file then.
 */
export { startFrom } from "./fastPath.js"
