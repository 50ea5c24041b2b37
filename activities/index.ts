import { createSendEmailActivities, type SendEmailDeps } from './send-email';
import type { SendEmailActivities } from './send-email-types';

export type Activities = SendEmailActivities;
export type ActivityDeps = SendEmailDeps;

/** Every activity the workflows call, built from narrow dependencies. */
export function createActivities(deps: ActivityDeps): Activities {
  return { ...createSendEmailActivities(deps) };
}
