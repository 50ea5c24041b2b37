import * as yup from 'yup';
import { bodySchema } from '../../core/validate';
import { SLUG_RE } from '../../core/contacts/rules';
import { resourceName } from '../validate';

const name = resourceName();

export const createTopicSchema = bodySchema({
  slug: yup
    .string()
    .strict()
    .required('slug is required')
    .matches(SLUG_RE, 'slug must be 1–64 characters of a-z 0-9 - _, starting with a letter or digit'),
  /** Defaults to the slug, as for a topic created by a contact upsert. */
  name,
  /** Defaults to false: a contact is in a topic it never chose only when the topic says so. */
  default_opt_in: yup.boolean().strict(),
});

export const updateTopicSchema = bodySchema({ name, default_opt_in: yup.boolean().strict() });

export type CreateTopicBody = yup.InferType<typeof createTopicSchema>;
export type UpdateTopicBody = yup.InferType<typeof updateTopicSchema>;
