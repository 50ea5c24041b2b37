/** The limits of an automation definition (docs/api.md: Automations). Tags and kinds are the send's (core/emails/schema.ts). */

/** All steps, nested ones included. */
export const MAX_AUTOMATION_STEPS = 100;
/** Condition nesting: the top-level list is depth 1, a condition's then/else lists one deeper. */
export const MAX_AUTOMATION_DEPTH = 5;
export const MAX_AUTOMATION_NAME = 200;
/** Event names and ids (spec: Limits): 1 to 128 characters. */
export const MAX_EVENT_NAME = 128;
export const MAX_CONDITION_PROPERTY = 128;
/** Details listed at most (a hostile body could otherwise make one per array item). */
export const MAX_DETAILS = 50;
