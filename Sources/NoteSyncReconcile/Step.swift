import Foundation
import NoteSyncDiff
import NoteSyncModel
import NoteSyncSupport

/// One record's decision, with what the reconciler saw, and what the sync does for it.
public struct Step: Sendable {
    public var name: RecordName
    public var local: LocalFile?
    /// The base the record was decided against (boxed: a first sync's steps have none, and inline it would take
    /// 105 bytes of every step).
    public var base: BaseRecord? {
        get { boxedBase?.value }
        set { boxedBase = newValue.map(Box.init) }
    }
    /// The reconciler's decision; nil once the step is resolved (``action``), when nothing asks for it again.
    public var decision: Decision? {
        if case .decided(let decision) = stage { decision } else { nil }
    }
    /// Whether the decision was to push the local note (a save or a delete): a dry run counts these as pending.
    public let isPush: Bool
    /// Set when the step's record was renamed (here, on the server, or both): the note is decided at its new
    /// name, against the base it had under its old one.
    public var move: MovePlan? {
        get { boxedMove?.value }
        set { boxedMove = newValue.map(Box.init) }
    }
    /// Worked out from the decision once, by the engine's resolve; the dry
    /// run and the sync both consume it. Setting it replaces the decision.
    package var action: Action? {
        get { if case .resolved(let action) = stage { action } else { nil } }
        set { stage = .resolved(newValue) }
    }

    /// The decision, then the action that replaces it: each may carry a server head (120 bytes), so a step holds
    /// one stage at a time, not both inline beside the base: a first sync holds a step for every note.
    private enum Stage: Sendable {
        case decided(Decision)
        case resolved(Action?)
    }
    private var stage: Stage
    private var boxedBase: Box<BaseRecord>?
    /// The move, boxed: few steps have one, and inline it would make every step of a first sync 100 bytes longer.
    private var boxedMove: Box<MovePlan>?

    public init(name: RecordName, local: LocalFile?, base: BaseRecord?, decision: Decision, move: MovePlan? = nil) {
        self.name = name
        self.local = local
        self.stage = .decided(decision)
        if case .push = decision { isPush = true } else { isPush = false }
        self.base = base
        self.move = move
    }
}
