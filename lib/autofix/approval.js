'use strict';

// The approval gate between a passing sandbox run and the write: autoApprove, the
// caller's approve(review) (only a literal true approves), or needs-approval.

/**
 * @param {object} options autoFix's options (autoApprove, approve)
 * @param {object} review what a reviewer sees (file, paths, original, suggestion, diff, sandbox)
 * @param {object} shown diff, suggestion and sandbox, returned with every outcome
 * @returns {Promise<{ approval: 'auto' | 'approved' | 'denied' | 'none', outcome?: object }>}
 *   `outcome` is set when the file must not be written (rejected or needs-approval)
 */
async function decideApproval(options, review, shown) {
  if (options.autoApprove === true) return { approval: 'auto' };
  if (options.approve === undefined) {
    return {
      approval: 'none',
      outcome: {
        status: 'needs-approval',
        message: 'not applied: the suggestion passed the sandbox and needs approval (pass approve or autoApprove)',
        ...shown,
      },
    };
  }
  let approved;
  try {
    approved = (await options.approve(Object.freeze(review))) === true;
  } catch (err) {
    return {
      approval: 'denied',
      outcome: {
        status: 'rejected',
        message: `not applied: approve() threw ${(err && err.name) || 'an error'}: ${(err && err.message) || String(err)}`,
        auditMessage: 'not applied: approve() threw',
        ...shown,
      },
    };
  }
  if (!approved) {
    return {
      approval: 'denied',
      outcome: { status: 'rejected', message: 'not applied: the change was not approved', ...shown },
    };
  }
  return { approval: 'approved' };
}

module.exports = { decideApproval };
